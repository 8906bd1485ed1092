import { describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import { startTestRouter } from "../helpers/router.js";
import {
  type AccessLog,
  chat,
  deadUrl,
  errorCode,
  metric,
  okCompletion,
  sseData,
  startedPerTest,
  startLoggedRouter,
  startTinyUpstream,
  workerId,
} from "./support.js";

/**
 * With round_robin, the first request of a fresh router goes to the first worker listed, and its
 * retry to the next one: that makes "which worker failed first" deterministic.
 */
describe("retries, only where safe", () => {
  const started = startedPerTest();

  async function routerFor(
    urls: string[],
    overrides: Parameters<typeof startLoggedRouter>[0] = {},
  ): Promise<{ url: string; log: () => AccessLog[] }> {
    const logged = await startLoggedRouter({
      workerUrls: urls,
      policy: "round_robin",
      ...overrides,
    });
    started.router = logged.router;
    return { url: logged.router.url, log: logged.accessLog };
  }

  it("a refused connection (worker down) is retried on another worker and counted in radixgate_retries_total", async () => {
    const dead = await deadUrl();
    started.sims = [await startSimWorker({ id: "live", timeScale: 0 })];
    const { url, log } = await routerFor([dead, started.sims[0]!.url]);

    const res = await chat(url, "first goes to the dead worker");
    expect(res.status).toBe(200);
    expect(res.headers.get("x-radixgate-worker")).toBe(
      started.router!.context.registry.list()[1]!.id,
    );
    await res.arrayBuffer();
    expect(log().at(-1)).toMatchObject({ status: 200, attempts: 2 });
    expect(await metric(url, "radixgate_retries_total")).toBe(1);
    expect(
      await metric(url, "radixgate_upstream_errors_total", {
        worker: workerId(dead),
        kind: "connect",
      }),
    ).toBe(1);
  });

  it.each([502, 503, 504, 429])(
    "a %i answer is retried on another worker, which serves the request",
    async (status) => {
      started.sims = await Promise.all([
        startSimWorker({ id: "failing", timeScale: 0, faults: { status } }),
        startSimWorker({ id: "fine", timeScale: 0 }),
      ]);
      const [failing, fine] = started.sims as [SimWorker, SimWorker];
      const { url, log } = await routerFor([failing.url, fine.url]);

      const res = await chat(url, "retry me");
      expect(res.status).toBe(200);
      expect(((await res.json()) as { object: string }).object).toBe("chat.completion");
      expect(failing.stats().failed).toBe(1);
      expect(fine.stats().completed).toBe(1);
      expect(log().at(-1)).toMatchObject({ status: 200, attempts: 2 });
      expect(await metric(url, "radixgate_retries_total")).toBe(1);
      // 429 says "busy", not "broken": it does not count against the worker's breaker.
      const breaker = started.router!.context.registry.get(failing.url)!.breaker;
      expect(breaker.consecutiveFailures).toBe(status === 429 ? 0 : 1);
    },
  );

  it("Retry-After: 1 holds back the worker that sent it, not the retry: an idle worker gets the request well under 1 s", async () => {
    const busy = await startTinyUpstream((_req, res) => {
      res.writeHead(429, { "retry-after": "1", "content-type": "application/json" });
      res.end('{"error":{"message":"busy"}}');
    });
    const fine = await startTinyUpstream((_req, res) => okCompletion(res, "fine"));
    started.tiny = [busy, fine];
    const { url, log } = await routerFor([busy.url, fine.url], { retryMaxBackoffMs: 20 });

    const res = await chat(url, "be quick");
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    expect(log().at(-1)).toMatchObject({ status: 200, attempts: 2 });
    // The retry waits only the normal backoff (<= 20 ms here), never the worker's 1 s.
    expect(fine.hits[0]! - busy.hits[0]!).toBeLessThan(500);
    // ...and the worker that asked for a pause gets nothing until its Retry-After passes.
    const busyWorker = started.router!.context.registry.get(busy.url)!;
    expect(busyWorker.coolDownMs).toBeGreaterThan(0);
    expect(started.router!.context.registry.candidates()).not.toContain(busyWorker);
  });

  it("Retry-After: 10 is not passed to the client while another worker is free: the request is retried there", async () => {
    const busy = await startTinyUpstream((_req, res) => {
      res.writeHead(429, { "retry-after": "10", "content-type": "application/json" });
      res.end('{"error":{"message":"slow down","code":"rate_limited"}}');
    });
    const fine = await startTinyUpstream((_req, res) => okCompletion(res, "fine"));
    started.tiny = [busy, fine];
    const { url, log } = await routerFor([busy.url, fine.url], { retryMaxBackoffMs: 20 });

    const res = await chat(url, "rate limited");
    expect(res.status).toBe(200);
    expect(res.headers.get("x-radixgate-worker")).toBe(
      started.router!.context.registry.get(fine.url)!.id,
    );
    await res.arrayBuffer();
    expect(log().at(-1)).toMatchObject({ status: 200, attempts: 2 });
    const cooling = started.router!.context.registry.get(busy.url)!;
    expect(cooling.coolDownMs).toBeGreaterThan(5000);
    expect(cooling.toJSON().cool_down_ms).toBeGreaterThan(5000);
    // During its cool-down the worker that asked for a pause gets no new request at all.
    for (let i = 0; i < 3; i++) await (await chat(url, `next ${i}`)).arrayBuffer();
    expect(busy.hits).toHaveLength(1);
    expect(fine.hits).toHaveLength(4);
  });

  it("a Retry-After from the last worker that could answer goes to the client as it is", async () => {
    const busy = await startTinyUpstream((_req, res) => {
      res.writeHead(429, { "retry-after": "30", "content-type": "application/json" });
      res.end('{"error":{"message":"slow down","code":"rate_limited"}}');
    });
    started.tiny = [busy];
    const { url, log } = await routerFor([busy.url]);

    const res = await chat(url, "rate limited");
    expect(res.status).toBe(429);
    expect(res.headers.get("retry-after")).toBe("30");
    expect(await errorCode(res)).toBe("rate_limited");
    expect(log().at(-1)).toMatchObject({ status: 429, attempts: 1 });
  });

  it("while every worker cools down, the router answers 503 at once with the shortest Retry-After left", async () => {
    const busy = await startTinyUpstream((_req, res) => {
      res.writeHead(503, { "retry-after": "5", "content-type": "application/json" });
      res.end('{"error":{"message":"overloaded"}}');
    });
    started.tiny = [busy];
    const { url } = await routerFor([busy.url]);
    await (await chat(url, "first")).arrayBuffer();

    const res = await chat(url, "second");
    expect(res.status).toBe(503);
    expect(await errorCode(res)).toBe("no_workers_available");
    expect(Number(res.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(Number(res.headers.get("retry-after"))).toBeLessThanOrEqual(5);
    // The worker was not asked again during its cool-down.
    expect(busy.hits).toHaveLength(1);
  });

  it("--max-cool-down-secs caps a worker's Retry-After cool-down", async () => {
    const busy = await startTinyUpstream((_req, res) => {
      res.writeHead(429, { "retry-after": "3600" });
      res.end();
    });
    started.tiny = [busy];
    const { url } = await routerFor([busy.url], { maxCoolDownSecs: 2 });
    await (await chat(url, "first")).arrayBuffer();
    const worker = started.router!.context.registry.get(busy.url)!;
    expect(worker.coolDownMs).toBeGreaterThan(0);
    expect(worker.coolDownMs).toBeLessThanOrEqual(2000);
  });

  it("makes at most retryMaxAttempts attempts, each to a worker not yet tried", async () => {
    started.sims = await Promise.all(
      [1, 2, 3, 4].map((i) =>
        startSimWorker({ id: `f${i}`, timeScale: 0, faults: { status: 503 } }),
      ),
    );
    const { url, log } = await routerFor(
      started.sims.map((s) => s.url),
      { retryMaxAttempts: 3 },
    );

    const res = await chat(url, "everyone is busy");
    // The last worker's answer, as it sent it: nothing is left to try.
    expect(res.status).toBe(503);
    expect(res.headers.get("x-radixgate-worker")).not.toBeNull();
    expect(await errorCode(res)).toBe(503);
    const failed = started.sims.map((s) => s.stats().failed);
    expect(failed.reduce((a, b) => a + b, 0)).toBe(3);
    expect(Math.max(...failed)).toBe(1);
    expect(log().at(-1)).toMatchObject({ status: 503, attempts: 3 });
    expect(await metric(url, "radixgate_retries_total")).toBe(2);
    expect(await metric(url, "radixgate_upstream_errors_total", { kind: "status_503" })).toBe(3);
  });

  it("with fewer workers than retryMaxAttempts, each worker is tried once", async () => {
    started.sims = await Promise.all(
      [1, 2].map((i) => startSimWorker({ id: `g${i}`, timeScale: 0, faults: { status: 502 } })),
    );
    const { url, log } = await routerFor(
      started.sims.map((s) => s.url),
      { retryMaxAttempts: 5 },
    );
    const res = await chat(url, "two busy workers");
    expect(res.status).toBe(502);
    expect(await errorCode(res)).toBe(502);
    expect(started.sims.map((s) => s.stats().failed)).toEqual([1, 1]);
    expect(log().at(-1)).toMatchObject({ attempts: 2 });
  });

  it("with retries off (retryMaxAttempts 1), a 503 reaches the client as the worker sent it", async () => {
    const busy = await startTinyUpstream((_req, res) => {
      res.writeHead(503, { "retry-after": "0", "content-type": "application/json" });
      res.end('{"error":{"message":"overloaded","code":"busy"}}');
    });
    const fine = await startTinyUpstream((_req, res) => okCompletion(res, "fine"));
    started.tiny = [busy, fine];
    const { url, log } = await routerFor([busy.url, fine.url], { retryMaxAttempts: 1 });
    const res = await chat(url, "no second chance");
    expect(res.status).toBe(503);
    expect(res.headers.get("retry-after")).toBe("0");
    expect(await errorCode(res)).toBe("busy");
    expect(fine.hits).toHaveLength(0);
    expect(log().at(-1)).toMatchObject({ status: 503, attempts: 1 });
  });

  it.each([400, 404, 422, 500])(
    "a %i from the worker is passed through unchanged and never retried (attempts 1)",
    async (status) => {
      started.sims = await Promise.all([
        startSimWorker({ id: "strict", timeScale: 0, faults: { status } }),
        startSimWorker({ id: "other", timeScale: 0 }),
      ]);
      const [strict, other] = started.sims as [SimWorker, SimWorker];
      const { url, log } = await routerFor([strict.url, other.url]);

      const res = await chat(url, "not retryable");
      expect(res.status).toBe(status);
      // The worker's own error body, not a router error.
      const body = (await res.json()) as { error: { code: unknown; message: string } };
      expect(body.error.code).toBe(status);
      expect(body.error.message).toContain("injected fault");
      expect(other.stats().requests).toBe(0);
      expect(log().at(-1)).toMatchObject({ status, attempts: 1 });
      expect(await metric(url, "radixgate_retries_total")).toBe(0);
      // A 5xx says something about the worker; a 4xx says something about the request.
      expect(await metric(url, "radixgate_upstream_errors_total")).toBe(status >= 500 ? 1 : 0);
    },
  );

  it("never retries once a byte reached the client: a stream broken mid-way ends with an SSE error event and counts against the worker", async () => {
    started.sims = await Promise.all([
      // Real (small) step times: at timeScale 0 the sim writes and crashes in one tick, and the
      // destroyed socket drops the chunks before they leave.
      startSimWorker({ id: "crashy", timeScale: 1, stepFloorMs: 5, faults: { crashMidStream: 3 } }),
      startSimWorker({ id: "other", timeScale: 0 }),
    ]);
    const [crashy, other] = started.sims as [SimWorker, SimWorker];
    const { url, log } = await routerFor([crashy.url, other.url]);

    const res = await chat(url, "stream then break", { stream: true, max_tokens: 20 });
    expect(res.status).toBe(200);
    const events = sseData(await res.text());
    // Some tokens made it through before the break...
    expect(events.length).toBeGreaterThan(1);
    expect(events).not.toContain("[DONE]");
    // ...then one error event in the OpenAI shape, and the stream closed.
    const last = JSON.parse(events.at(-1)!) as { error: { code: string; message: string } };
    expect(last.error.code).toBe("upstream_error");
    expect(crashy.stats().crashed).toBe(1);
    expect(other.stats().requests).toBe(0);
    expect(log().at(-1)).toMatchObject({ attempts: 1, error: "stream" });
    expect(started.router!.context.registry.get(crashy.url)!.breaker.consecutiveFailures).toBe(1);
    expect(
      await metric(url, "radixgate_upstream_errors_total", {
        worker: workerId(crashy.url),
        kind: "stream",
      }),
    ).toBe(1);
    expect(await metric(url, "radixgate_retries_total")).toBe(0);
  });

  it("a non-streamed answer cut short is cut short for the client too: it never looks complete", async () => {
    const cut = await startTinyUpstream((_req, res) => {
      res.writeHead(200, { "content-type": "application/json", "content-length": 100 });
      res.write('{"id":"partial",');
      setTimeout(() => res.socket?.destroy(), 20);
    });
    started.tiny = [cut];
    started.router = await startTestRouter({ workerUrls: [cut.url] });
    const res = await chat(started.router.url, "truncated");
    expect(res.status).toBe(200);
    await expect(res.text()).rejects.toThrow();
    expect(started.router.context.registry.list()[0]!.breaker.consecutiveFailures).toBe(1);
  });
});
