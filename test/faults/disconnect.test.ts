import { describe, expect, it } from "vitest";
import { startSimWorker } from "../../sim/worker.js";
import { startTestRouter, waitFor } from "../helpers/router.js";
import { chat, metric, startedPerTest } from "./support.js";

// The streaming variant is in test/integration/data-plane.test.ts.
describe("client disconnect", () => {
  const started = startedPerTest();

  it("a client that leaves while waiting for a slow non-streamed answer aborts the upstream request, in-flight returns to 0, the worker is not blamed", async () => {
    // 500 tokens at 20 ms a step: the answer would take 10 s.
    started.sims = [await startSimWorker({ id: "slow", timeScale: 1, stepFloorMs: 20 })];
    const sim = started.sims[0]!;
    started.router = await startTestRouter({ workerUrls: [sim.url], cbFailureThreshold: 1 });
    const worker = started.router.context.registry.list()[0]!;

    const client = new AbortController();
    const pending = chat(
      started.router.url,
      "a slow answer",
      { max_tokens: 500 },
      { signal: client.signal },
    );
    await waitFor(() => sim.stats().running === 1, 2000, "the request running at the worker");
    expect(worker.inFlight).toBe(1);
    client.abort();
    await expect(pending).rejects.toThrow();

    await waitFor(() => sim.stats().aborted === 1, 2000, "the worker to see the abort");
    await waitFor(() => worker.inFlight === 0, 2000, "in-flight back to 0");
    expect(sim.stats().inFlight).toBe(0);
    expect(worker.breaker.consecutiveFailures).toBe(0);
    expect(worker.breaker.state).toBe("closed");
    expect(await metric(started.router.url, "radixgate_upstream_errors_total")).toBe(0);
    expect(await metric(started.router.url, "radixgate_retries_total")).toBe(0);
    // The worker is still in rotation.
    expect((await chat(started.router.url, "next one", { max_tokens: 1 })).status).toBe(200);
  });

  it("a client that leaves while the worker hangs frees the worker's slot too", async () => {
    started.sims = [await startSimWorker({ id: "hang", timeScale: 0, faults: { hang: true } })];
    const sim = started.sims[0]!;
    started.router = await startTestRouter({
      workerUrls: [sim.url],
      cbFailureThreshold: 1,
      firstByteTimeoutSecs: 30,
    });
    const client = new AbortController();
    const pending = chat(started.router.url, "hello?", {}, { signal: client.signal });
    await waitFor(() => sim.stats().hanging === 1, 2000, "the request held by the worker");
    client.abort();
    await expect(pending).rejects.toThrow();
    await waitFor(() => sim.stats().hanging === 0, 2000, "the worker to see the abort");
    await waitFor(
      () => started.router!.context.registry.list()[0]!.inFlight === 0,
      2000,
      "in-flight back to 0",
    );
    expect(started.router.context.registry.list()[0]!.breaker.state).toBe("closed");
  });
});
