/**
 * Admission sees a slot freed by a request's end at once (issue 24): the router knows its own
 * requests at the engine, so when one ends the saturation estimate drops without waiting for the
 * next engine reading (here, none comes: the poll interval is a minute and the test reads by hand)
 * or for the first byte of the request the engine starts in its place. Real sockets, a simulated
 * engine with a batch of 2.
 */
import { describe, expect, it } from "vitest";
import { startSimWorker } from "../../sim/worker.js";
import { startedPerTest } from "../faults/support.js";
import { HOLD_AT_FULL_BATCH } from "../helpers/admission-settings.js";
import { startTestRouter, waitFor } from "../helpers/router.js";
import { streamCompletion } from "../helpers/streamed-completion.js";

function streamed(
  routerUrl: string,
  prompt: string,
  maxTokens: number,
  signal: AbortSignal,
): Promise<{ firstByte: Promise<void>; done: Promise<void> }> {
  return streamCompletion(routerUrl, prompt, maxTokens, { signal });
}

describe("admission: a request's end frees its slot at once", () => {
  const started = startedPerTest();

  it("releases a held request when a running one ends, before the engine's queued one starts", async () => {
    // Live gauges: the test reads the engine by hand at chosen moments (SGLang sets them at a
    // prefill batch and every 40 decode steps: sim/engine-gauges.ts).
    const sim = await startSimWorker({ id: "busy", maxRunning: 2, decodeLogInterval: 0 });
    started.sims = [sim];
    started.router = await startTestRouter({
      workerUrls: [sim.url],
      ...HOLD_AT_FULL_BATCH,
    });
    const router = started.router;
    const admission = router.context.admission;
    const stop = new AbortController();
    try {
      // A reading with the batch full and one queued teaches the router the batch size (2).
      const wave = await Promise.all(
        [0, 1, 2].map((i) => streamed(router.url, `wave ${i}`, 60, stop.signal)),
      );
      await waitFor(
        () => sim.stats().running === 2 && sim.stats().waiting >= 1,
        5000,
        "the engine full and queueing",
      );
      await router.context.introspection.pollAll();
      await Promise.all(wave.map((w) => w.done));

      // Two running (one ends soon, one long), read by hand: queue 0, batch full.
      const short = await streamed(router.url, "short one", 20, stop.signal);
      const long = await streamed(router.url, "long one", 100_000, stop.signal);
      await Promise.all([short.firstByte, long.firstByte]);
      await router.context.introspection.pollAll();

      // A long answer, not streamed, waits in the engine's queue (its first byte comes back only
      // with its end, half a minute later: the simulator catches up on steps a stalled event loop
      // missed, so a shorter one could end within a stall of a loaded machine); the next request
      // is held by the router.
      let queuedDone = false;
      const queued = fetch(`${router.url}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "m", prompt: "queued one", max_tokens: 5000 }),
        signal: stop.signal,
      })
        .then((r) => r.text())
        .catch(() => undefined)
        .finally(() => {
          queuedDone = true;
        });
      await waitFor(() => sim.stats().waiting === 1, 5000, "one request in the engine's queue");
      const before = sim.stats().requests;
      const held = fetch(`${router.url}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "m", prompt: "held one", max_tokens: 4 }),
        signal: stop.signal,
      }).catch(() => undefined);
      await waitFor(() => admission.waiting === 1, 5000, "the router holding a request");

      // The short one ends: its slot is free, so the held request goes now, while the queued one
      // is still seconds from its end (the old estimate waited for that first byte, or a poll).
      await short.done;
      await waitFor(() => sim.stats().requests > before, 20_000, "the held request released");
      expect(queuedDone).toBe(false);
      expect(admission.waiting).toBe(0);
      void held;
      void queued;
    } finally {
      stop.abort();
    }
  }, 30_000);
});
