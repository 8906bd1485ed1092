import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import type { RunningRouter } from "../../src/server.js";
import { postJson, startTestRouter } from "../helpers/router.js";

/**
 * The relay writes a response's headers together with its first body chunk (one write, not two),
 * except that a stream's headers must not wait for prefill: engines send them at once, and so
 * must the router, or a client's header timeout would count the prefill.
 */
describe("stream headers during a long prefill", () => {
  let worker: SimWorker;
  let router: RunningRouter;

  beforeAll(async () => {
    // About 1,000 prompt tokens at 600 tokens/s: well over a second of prefill before any token.
    worker = await startSimWorker({ id: "slow-prefill", timeScale: 1, prefillTokensPerSec: 600 });
    router = await startTestRouter({ workerUrls: [worker.url] });
  });

  afterAll(async () => {
    await router.stop(100);
    await worker.close();
  });

  it("reach the client before the first token", async () => {
    const started = Date.now();
    const res = await postJson(`${router.url}/v1/completions`, {
      model: "m",
      prompt: "word ".repeat(1000),
      max_tokens: 2,
      stream: true,
    });
    const headersMs = Date.now() - started;
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const reader = res.body!.getReader();
    const first = await reader.read();
    const firstChunkMs = Date.now() - started;
    expect(first.done).toBe(false);
    while (!(await reader.read()).done) {}
    // The headers came while the worker was still prefilling, not with the first token.
    expect(firstChunkMs - headersMs).toBeGreaterThan(500);
  });
});
