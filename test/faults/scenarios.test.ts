import { describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import type { RunningRouter } from "../../src/server.js";
import { workerIdFor } from "../../src/workers/worker-url.js";
import { postJson, startTestRouter, waitFor } from "../helpers/router.js";
import { chat, deadUrl, errorCode, metric, sseData, startedPerTest, workerId } from "./support.js";

/** Prompts that share no prefix, so cache_aware spreads them by load (ties rotate). */
const distinct = (i: number) => `${String.fromCharCode(65 + (i % 26)).repeat(24)} ${i}`;

type WorkerJson = { id: string; url: string; healthy: boolean; circuit: string };

async function listed(router: RunningRouter, url: string): Promise<WorkerJson | undefined> {
  const { workers } = (await (await fetch(`${router.url}/workers`)).json()) as {
    workers: WorkerJson[];
  };
  return workers.find((w) => w.url === url);
}

describe("fault-injection scenarios", () => {
  const started = startedPerTest();

  it("a worker down at start: the first probe finds it, so every request succeeds without a retry", async () => {
    const dead = await deadUrl();
    started.sims = await Promise.all(
      [1, 2].map((i) => startSimWorker({ id: `up${i}`, timeScale: 0 })),
    );
    started.router = await startTestRouter({
      policy: "cache_aware",
      workerUrls: [dead, ...started.sims.map((s) => s.url)],
      healthCheckIntervalSecs: 0.05,
      healthFailureThreshold: 2,
      cbFailureThreshold: 100,
    });
    // Known to be down before the first request (issue 13 item 4), not after failures.
    expect((await listed(started.router, dead))?.healthy).toBe(false);
    const statuses = await Promise.all(
      Array.from({ length: 12 }, async (_, i) => {
        const res = await chat(started.router!.url, distinct(i));
        await res.arrayBuffer();
        return res.status;
      }),
    );
    expect(statuses).toEqual(Array(12).fill(200));
    expect(await metric(started.router.url, "radixgate_retries_total")).toBe(0);
    expect(await metric(started.router.url, "radixgate_upstream_errors_total")).toBe(0);
  });

  it("a worker killed under load: every non-streamed request still succeeds through retries", async () => {
    started.sims = await Promise.all(
      [1, 2, 3].map((i) => startSimWorker({ id: `k${i}`, timeScale: 1, stepFloorMs: 10 })),
    );
    const victim = started.sims[0]!;
    started.router = await startTestRouter({
      policy: "cache_aware",
      workerUrls: started.sims.map((s) => s.url),
    });
    const requests = Array.from({ length: 20 }, async (_, i) => {
      const res = await chat(started.router!.url, distinct(i), { max_tokens: 20 });
      const body = (await res.json()) as { object?: string };
      return { status: res.status, object: body.object };
    });
    // Kill it while it is generating answers.
    await waitFor(() => victim.stats().running >= 2, 3000, "requests running on the victim");
    const cut = victim.stats().running;
    await victim.close();

    const results = await Promise.all(requests);
    expect(results.map((r) => r.status)).toEqual(Array(20).fill(200));
    expect(results.every((r) => r.object === "chat.completion")).toBe(true);
    expect(victim.stats().completed).toBeLessThan(20);
    // Each request cut on the victim (connection lost before any response) went to another worker.
    expect(
      await metric(started.router.url, "radixgate_upstream_errors_total", {
        worker: workerId(victim.url),
        kind: "reset",
      }),
    ).toBeGreaterThanOrEqual(cut);
    expect(await metric(started.router.url, "radixgate_retries_total")).toBeGreaterThanOrEqual(cut);
    await waitFor(
      () => started.router!.context.registry.list().every((w) => w.inFlight === 0),
      2000,
      "in-flight 0",
    );
  });

  it("a worker killed under load: its streams end with an SSE error event, the others complete", async () => {
    started.sims = await Promise.all(
      [1, 2, 3].map((i) => startSimWorker({ id: `s${i}`, timeScale: 1, stepFloorMs: 10 })),
    );
    const victim = started.sims[0]!;
    const victimId = workerIdFor(victim.url);
    started.router = await startTestRouter({
      policy: "cache_aware",
      workerUrls: started.sims.map((s) => s.url),
    });
    // Headers received: each stream is committed to its worker.
    const responses = await Promise.all(
      Array.from({ length: 9 }, (_, i) =>
        chat(started.router!.url, distinct(i), { stream: true, max_tokens: 60 }),
      ),
    );
    const onVictim = responses.filter((r) => r.headers.get("x-radixgate-worker") === victimId);
    expect(onVictim.length).toBeGreaterThan(0);
    await victim.close();

    const bodies = await Promise.all(
      responses.map(async (r) => ({
        worker: r.headers.get("x-radixgate-worker"),
        events: sseData(await r.text()),
      })),
    );
    for (const { worker, events } of bodies) {
      if (worker === victimId) {
        const last = JSON.parse(events.at(-1)!) as { error: { code: string } };
        expect(last.error.code).toBe("upstream_error");
      } else {
        expect(events.at(-1)).toBe("[DONE]");
      }
    }
    expect(
      await metric(started.router.url, "radixgate_upstream_errors_total", {
        worker: workerId(victim.url),
        kind: "stream",
      }),
    ).toBe(onVictim.length);
  });

  it("a worker answering 500s: its breaker opens, traffic moves to the others, it recovers once fixed and cbTimeoutSecs passed", async () => {
    started.sims = await Promise.all([
      startSimWorker({ id: "bad", timeScale: 0, faults: { status: 500 } }),
      startSimWorker({ id: "good", timeScale: 0 }),
    ]);
    const [bad, good] = started.sims as [SimWorker, SimWorker];
    started.router = await startTestRouter({
      policy: "cache_aware",
      workerUrls: [bad.url, good.url],
      cbFailureThreshold: 3,
      // Long enough that the 16 requests below (slow when this test runs first, cold) all fall
      // inside the open period; a half-open trial among them would be a fourth 500.
      cbTimeoutSecs: 1.5,
    });
    const statuses: number[] = [];
    for (let i = 0; i < 16; i++) {
      const res = await chat(started.router.url, distinct(i));
      await res.arrayBuffer();
      statuses.push(res.status);
    }
    // 500 is the worker's own answer (passed through, not retried) until the breaker opens.
    expect(statuses.filter((s) => s === 500)).toHaveLength(3);
    expect(bad.stats().requests).toBe(3);
    expect((await listed(started.router, bad.url))?.circuit).toBe("open");

    bad.setFaults({ status: null });
    await waitFor(
      async () => (await listed(started.router!, bad.url))?.circuit === "half_open",
      5000,
      "half-open",
    );
    for (let i = 0; i < 8; i++)
      expect((await chat(started.router.url, distinct(i + 16))).status).toBe(200);
    expect((await listed(started.router, bad.url))?.circuit).toBe("closed");
    expect(bad.stats().completed).toBeGreaterThanOrEqual(2);
  });

  it("a worker that hangs: its requests time out with 504, its breaker opens, the rest is served elsewhere", async () => {
    started.sims = await Promise.all([
      startSimWorker({ id: "stuck", timeScale: 0, faults: { hang: true } }),
      startSimWorker({ id: "ok", timeScale: 0 }),
    ]);
    const [stuck] = started.sims as [SimWorker, SimWorker];
    started.router = await startTestRouter({
      policy: "cache_aware",
      workerUrls: started.sims.map((s) => s.url),
      firstByteTimeoutSecs: 0.2,
      cbFailureThreshold: 2,
      cbTimeoutSecs: 30,
    });
    const codes: string[] = [];
    for (let i = 0; i < 10; i++) {
      const res = await chat(started.router.url, distinct(i));
      if (res.status === 200) {
        await res.arrayBuffer();
        codes.push("ok");
      } else {
        expect(res.status).toBe(504);
        codes.push((await errorCode(res)) ?? "?");
      }
    }
    expect(codes.filter((c) => c === "upstream_timeout")).toHaveLength(2);
    expect(codes.filter((c) => c === "ok")).toHaveLength(8);
    expect((await listed(started.router, stuck.url))?.circuit).toBe("open");
    // The router gave up on the held requests: the worker sees them aborted.
    await waitFor(() => stuck.stats().hanging === 0, 2000, "aborted at the worker");
  });

  it("a flapping worker (unhealthy, healthy, unhealthy, ...): requests keep succeeding", async () => {
    started.sims = await Promise.all([
      startSimWorker({ id: "flappy", timeScale: 0 }),
      startSimWorker({ id: "steady", timeScale: 0 }),
    ]);
    const [flappy] = started.sims as [SimWorker, SimWorker];
    started.router = await startTestRouter({
      policy: "cache_aware",
      workerUrls: started.sims.map((s) => s.url),
      healthCheckIntervalSecs: 0.03,
      healthFailureThreshold: 1,
      healthSuccessThreshold: 1,
      cbTimeoutSecs: 0.1,
    });
    const worker = started.router.context.registry.get(flappy.url)!;
    // On a timeout, say where the worker stood: these waits depend on health, breaker and cool-down.
    const state = (what: string) => () =>
      `${what} (healthy ${worker.healthy}, circuit ${worker.breaker.state}, in flight ${worker.inFlight}, cool-down ${worker.coolDownMs} ms, admits ${worker.breaker.admits()})`;
    const statuses: number[] = [];
    let running = true;
    // Prompts that share no prefix: each is a cache miss and goes to the least loaded worker, so
    // the flapping worker gets traffic whenever it is up (with shared prefixes, the steady worker
    // would win every request on cache affinity while the other was down, and keep winning).
    const load = Array.from({ length: 3 }, async (_, lane) => {
      for (let i = 0; running; i++) {
        const res = await chat(started.router!.url, `${lane * 100_000 + i} ${"x".repeat(24)}`);
        await res.arrayBuffer();
        statuses.push(res.status);
      }
    });
    let flaps = 0;
    try {
      for (let cycle = 0; cycle < 3; cycle++) {
        // Down: fails its health checks and answers 503 to whatever still reaches it.
        flappy.setFaults({ unhealthy: true, status: 503 });
        await waitFor(() => !worker.healthy, 3000, state("unhealthy"));
        flappy.setFaults({ unhealthy: false, status: null });
        await waitFor(() => worker.healthy, 3000, state("healthy"));
        flaps += 1;
      }
      // Let some traffic reach it while it is up.
      const served = flappy.stats().completed;
      await waitFor(
        () => flappy.stats().completed > served,
        3000,
        state("traffic back on the worker"),
      );
    } finally {
      running = false;
      await Promise.allSettled(load);
    }
    await Promise.all(load);
    expect(flaps).toBe(3);
    expect(statuses.length).toBeGreaterThan(10);
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
  });

  it("a worker removed while streams are in flight: they complete normally, new requests go elsewhere", async () => {
    started.sims = await Promise.all(
      [1, 2].map((i) => startSimWorker({ id: `r${i}`, timeScale: 1, stepFloorMs: 10 })),
    );
    const [leaving, staying] = started.sims as [SimWorker, SimWorker];
    const leavingId = workerIdFor(leaving.url);
    started.router = await startTestRouter({
      policy: "cache_aware",
      workerUrls: started.sims.map((s) => s.url),
    });
    const responses = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        chat(started.router!.url, distinct(i), { stream: true, max_tokens: 30 }),
      ),
    );
    const onLeaving = responses.filter((r) => r.headers.get("x-radixgate-worker") === leavingId);
    expect(onLeaving.length).toBeGreaterThan(0);

    const removed = await fetch(`${started.router.url}/workers/${leavingId}`, { method: "DELETE" });
    expect(removed.status).toBe(202);
    const before = leaving.stats().requests;
    for (let i = 0; i < 4; i++) {
      const res = await postJson(`${started.router.url}/v1/completions`, {
        prompt: distinct(i + 10),
        max_tokens: 1,
      });
      expect(res.status).toBe(200);
      expect(res.headers.get("x-radixgate-worker")).toBe(workerIdFor(staying.url));
      await res.arrayBuffer();
    }
    expect(leaving.stats().requests).toBe(before);

    const endings = await Promise.all(responses.map(async (r) => sseData(await r.text()).at(-1)));
    expect(endings).toEqual(Array(6).fill("[DONE]"));
    expect(leaving.stats().completed).toBe(onLeaving.length);
    expect(leaving.stats().aborted).toBe(0);
    expect(started.router.context.registry.size).toBe(1);
  });
});
