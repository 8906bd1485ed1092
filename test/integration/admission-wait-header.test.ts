/**
 * --queue-wait-header (issue 24 follow-up): each answer says how long its request waited in the
 * router's queue, so a client (and bench:admission) can split a slow first token between the
 * router and the engine. Real sockets, one simulated engine, --max-concurrent-requests 1 so the
 * second of two requests waits for the first to end.
 */
import { describe, expect, it } from "vitest";
import { startSimWorker } from "../../sim/worker.js";
import { parseConfig } from "../../src/config.js";
import { ConfigError } from "../../src/errors.js";
import { startedPerTest } from "../faults/support.js";
import { startTestRouter, waitFor } from "../helpers/router.js";

function ask(url: string, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    // 24 output tokens at one engine step (6 ms) each: ~150 ms, so the second request waits.
    body: JSON.stringify({ model: "m", prompt: "how long did I wait?", max_tokens: 24 }),
  });
}

describe("--queue-wait-header", () => {
  const started = startedPerTest();

  async function oneAtATime(queueWaitHeader?: string) {
    const sim = await startSimWorker({ id: "one" });
    started.sims = [sim];
    started.router = await startTestRouter({
      workerUrls: [sim.url],
      maxConcurrentRequests: 1,
      queueTimeoutSecs: 30,
      ...(queueWaitHeader === undefined ? {} : { queueWaitHeader }),
    });
    return started.router;
  }

  it("says 0 for a request that went straight through and the wait of one that queued", async () => {
    const router = await oneAtATime("x-queue-wait-ms");
    const first = ask(router.url);
    await waitFor(() => router.context.admission.running === 1, 2000, "the first admitted");
    const second = ask(router.url);
    await waitFor(() => router.context.admission.waiting === 1, 2000, "the second queued");
    const [a, b] = await Promise.all([first, second]);
    expect(a.status).toBe(200);
    expect(b.status).toBe(200);
    expect(a.headers.get("x-queue-wait-ms")).toBe("0");
    // It waited for the whole of the first request's 24 engine steps (whole milliseconds).
    expect(b.headers.get("x-queue-wait-ms")).toMatch(/^[1-9]\d*$/);
    await Promise.all([a.text(), b.text()]);
  });

  it("is sent with a 429 after the request's queue deadline too", async () => {
    const router = await oneAtATime("x-queue-wait-ms");
    const first = ask(router.url);
    await waitFor(() => router.context.admission.running === 1, 2000, "the first admitted");
    const hurried = await ask(router.url, { "x-queue-timeout-secs": "0.05" });
    expect(hurried.status).toBe(429);
    expect(Number(hurried.headers.get("x-queue-wait-ms"))).toBeGreaterThan(0);
    await hurried.text();
    await (await first).text();
  });

  it("is off by default: no such header", async () => {
    const router = await oneAtATime();
    const res = await ask(router.url);
    expect(res.status).toBe(200);
    expect([...res.headers.keys()].filter((k) => k.includes("wait"))).toEqual([]);
    await res.text();
  });

  it("refuses a header name the router sets itself", () => {
    expect(() => parseConfig({ queueWaitHeader: "X-Request-Id" })).toThrow(ConfigError);
    expect(parseConfig({ queueWaitHeader: "X-Queue-Wait-Ms" }).admission.queueWaitHeader).toBe(
      "x-queue-wait-ms",
    );
    expect(parseConfig({ queueWaitHeader: "" }).admission.queueWaitHeader).toBeUndefined();
  });
});
