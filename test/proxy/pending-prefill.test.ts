import { describe, expect, it } from "vitest";
import { startSimWorker } from "../../sim/worker.js";
import type { Worker } from "../../src/workers/worker.js";
import { chat, startedPerTest } from "../faults/support.js";
import { startTestRouter, waitFor } from "../helpers/router.js";

/**
 * Worker.pendingPrefillChars (the queue prefix_cost reads) is raised at dispatch by the request's
 * uncached characters and comes back down on every way an attempt can end: first byte, complete
 * answer, error answer, refused connection, retry elsewhere, client gone.
 */
describe("pending prefill accounting", () => {
  const started = startedPerTest();

  const workers = (): readonly Worker[] => started.router!.context.registry.list();
  const settled = (what: string) =>
    waitFor(
      () =>
        workers().every(
          (w) => w.pendingPrefillChars === 0 && w.pendingPrefillRequests === 0 && w.inFlight === 0,
        ),
      3000,
      `${what}: pending prefill and in-flight back to 0`,
    );

  it("holds a request's uncached characters while the worker has not answered, and drops them when the client leaves", async () => {
    started.sims = [await startSimWorker({ id: "hang", timeScale: 0, faults: { hang: true } })];
    started.router = await startTestRouter({
      workerUrls: [started.sims[0]!.url],
      policy: "prefix_cost",
      firstByteTimeoutSecs: 30,
    });
    const client = new AbortController();
    const pending = chat(
      started.router.url,
      "a question nobody answers",
      {},
      { signal: client.signal },
    );
    await waitFor(() => started.sims[0]!.stats().hanging === 1, 2000, "the worker holding it");
    const worker = workers()[0]!;
    // Cold worker: the whole routing text is still to prefill.
    expect(worker.pendingPrefillChars).toBeGreaterThan("a question nobody answers".length);
    expect(worker.pendingPrefillRequests).toBe(1);
    client.abort();
    await expect(pending).rejects.toThrow();
    await settled("client abort");
  });

  it("releases them at the first streamed byte, while the answer goes on streaming", async () => {
    // 500 tokens at 20 ms a step: the stream lasts about 10 s unless the client leaves.
    started.sims = [await startSimWorker({ id: "slow", timeScale: 1, stepFloorMs: 20 })];
    started.router = await startTestRouter({
      workerUrls: [started.sims[0]!.url],
      policy: "prefix_cost",
    });
    const client = new AbortController();
    const response = await chat(
      started.router.url,
      "tell me a long story",
      { max_tokens: 500, stream: true },
      { signal: client.signal },
    );
    expect(response.status).toBe(200);
    const reader = response.body!.getReader();
    const first = await reader.read();
    expect(first.done).toBe(false);
    const worker = workers()[0]!;
    expect(worker.inFlight).toBe(1);
    expect(worker.pendingPrefillChars).toBe(0);
    expect(worker.pendingPrefillRequests).toBe(0);
    client.abort();
    await reader.cancel().catch(() => {});
    await settled("stream cut by the client");
  });

  it("releases them when an answer completes, streamed or not", async () => {
    started.sims = [await startSimWorker({ id: "fast", timeScale: 0 })];
    started.router = await startTestRouter({
      workerUrls: [started.sims[0]!.url],
      policy: "prefix_cost",
    });
    const plain = await chat(started.router.url, "hello", { max_tokens: 3 });
    expect(plain.status).toBe(200);
    await plain.text();
    const streamed = await chat(started.router.url, "hello again", { max_tokens: 3, stream: true });
    expect(streamed.status).toBe(200);
    await streamed.text();
    await settled("success");
  });

  it("releases them on an error answer and on a refused connection", async () => {
    started.sims = [await startSimWorker({ id: "broken", timeScale: 0, faults: { status: 500 } })];
    started.router = await startTestRouter({
      workerUrls: [started.sims[0]!.url, "http://127.0.0.1:9"],
      policy: "prefix_cost",
      retryMaxAttempts: 1,
      cbFailureThreshold: 1000,
    });
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) {
      const response = await chat(started.router.url, `question ${i}`);
      statuses.push(response.status);
      await response.text();
    }
    expect(statuses.every((s) => s >= 500)).toBe(true);
    expect(started.sims[0]!.stats().failed).toBeGreaterThan(0);
    await settled("errors");
  });

  it("releases the first worker's share when the request is retried on another", async () => {
    started.sims = [
      await startSimWorker({ id: "failing", timeScale: 0, faults: { status: 503 } }),
      await startSimWorker({ id: "good", timeScale: 0 }),
    ];
    started.router = await startTestRouter({
      workerUrls: started.sims.map((s) => s.url),
      policy: "prefix_cost",
      retryMaxAttempts: 3,
      cbFailureThreshold: 1000,
    });
    for (let i = 0; i < 4; i++) {
      const response = await chat(started.router.url, `question ${i}`);
      expect(response.status).toBe(200);
      await response.text();
    }
    expect(started.sims[0]!.stats().failed).toBeGreaterThan(0);
    await settled("retries");
  });
});
