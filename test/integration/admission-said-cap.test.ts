/**
 * Admission holds a flood's first burst at an engine that said its running cap (issue 24): SGLang's
 * /get_server_info gives it (the simulator answers max_running_requests as SGLang's server
 * arguments do), so the router knows the batch before any reading has shown the engine full.
 * Without it the burst reached the engine (about 20 queued at each in bench:admission) and every
 * request held behind it waited for that queue to drain, over a second. Real sockets, a simulated
 * engine with a batch of 2, and no engine reading during the burst.
 */
import { describe, expect, it } from "vitest";
import { startSimWorker } from "../../sim/worker.js";
import { startedPerTest } from "../faults/support.js";
import { HOLD_AT_FULL_BATCH } from "../helpers/admission-settings.js";
import { startTestRouter, waitFor } from "../helpers/router.js";

describe("admission: the engine's said running cap", () => {
  const started = startedPerTest();

  it("holds a burst beyond the cap and the queue depth before any reading shows a queue", async () => {
    const sim = await startSimWorker({ id: "capped", maxRunning: 2 });
    started.sims = [sim];
    started.router = await startTestRouter({
      workerUrls: [sim.url],
      ...HOLD_AT_FULL_BATCH,
    });
    const router = started.router;
    // One reading of the idle engine: nothing running, nothing queued, its cap said.
    await router.context.introspection.pollAll();
    const stop = new AbortController();
    try {
      for (let i = 0; i < 5; i++) {
        void fetch(`${router.url}/v1/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ model: "m", prompt: `burst ${i}`, max_tokens: 100_000 }),
          signal: stop.signal,
        }).catch(() => undefined);
      }
      // Two run, one waits in the engine's queue (depth 1), two wait in the router.
      await waitFor(
        () => router.context.admission.waiting + sim.stats().requests === 5,
        5000,
        "every request either at the engine or held",
      );
      expect(sim.stats().requests).toBe(3);
      expect(router.context.admission.waiting).toBe(2);
    } finally {
      stop.abort();
    }
  }, 30_000);
});
