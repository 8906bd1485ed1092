/**
 * A request let go because some worker has room goes to a worker with room (issue 24): the
 * routing policy alone may prefer a saturated worker (here cache_aware, for the prefix it holds;
 * in bench:admission prefix_cost, for its smaller pending prefill), where the request waits in
 * the engine's queue while the worker with room stays one short. Real sockets, two simulated
 * engines with a batch of 1.
 */
import { describe, expect, it } from "vitest";
import { startSimWorker } from "../../sim/worker.js";
import { startedPerTest } from "../faults/support.js";
import { HOLD_AT_FULL_BATCH } from "../helpers/admission-settings.js";
import { startTestRouter, waitFor } from "../helpers/router.js";

const PREFIX = "shared system prompt ".repeat(100);

function complete(url: string, prompt: string, maxTokens: number, signal: AbortSignal) {
  return fetch(`${url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "m", prompt, max_tokens: maxTokens }),
    signal,
  })
    .then((r) => r.text())
    .catch(() => undefined);
}

describe("admission: a request goes where there is room", () => {
  const started = startedPerTest();

  it("routes away from a saturated worker the policy prefers, to one with room", async () => {
    const sims = [
      await startSimWorker({ id: "one", maxRunning: 1 }),
      await startSimWorker({ id: "two", maxRunning: 1 }),
    ];
    started.sims = sims;
    started.router = await startTestRouter({
      workerUrls: sims.map((s) => s.url),
      policy: "cache_aware",
      ...HOLD_AT_FULL_BATCH,
    });
    const router = started.router;
    const stop = new AbortController();
    try {
      // The first request with the prefix: whichever worker takes it holds the prefix.
      await complete(router.url, `${PREFIX} first`, 2, stop.signal);
      const hot = sims.find((s) => s.stats().requests === 1);
      const cold = sims.find((s) => s !== hot);
      if (hot === undefined || cold === undefined)
        throw new Error("the first request went nowhere");

      // Other clients fill the hot engine: one running, one queued; a reading shows it.
      for (const i of [0, 1]) void complete(hot.url, `direct ${i}`, 100_000, stop.signal);
      await waitFor(
        () => hot.stats().running === 1 && hot.stats().waiting === 1,
        5000,
        "the hot engine full and queueing",
      );
      // SGLang sets its gauges at a prefill batch and every 40 decode steps: the queue shows at
      // the first update after it formed.
      const hotWorker = router.context.registry.list().find((w) => w.url === hot.url);
      await waitFor(
        async () => {
          await router.context.introspection.pollAll();
          return hotWorker?.signals.load(Date.now())?.queued === 1;
        },
        5000,
        "a reading of the hot engine's queue",
      );
      const explained = await fetch(`${router.url}/debug/route/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "m", prompt: `${PREFIX} second`, max_tokens: 2 }),
      });
      const saturation = (await explained.json()) as {
        admission: { would_queue: boolean; workers: { saturated: boolean }[] };
      };
      expect(saturation.admission.would_queue).toBe(false);
      expect(saturation.admission.workers.map((w) => w.saturated).sort()).toEqual([false, true]);

      // The policy would take the hot worker (it holds the whole prefix, and none of this
      // router's requests run there); the request goes to the cold one, which has room.
      const coldBefore = cold.stats().requests;
      const hotBefore = hot.stats().requests;
      const answer = await complete(
        router.url,
        `${PREFIX} second`,
        2,
        AbortSignal.any([stop.signal, AbortSignal.timeout(5000)]),
      );
      expect(answer).toBeDefined();
      expect(cold.stats().requests).toBe(coldBefore + 1);
      expect(hot.stats().requests).toBe(hotBefore);
    } finally {
      stop.abort();
    }
  }, 30_000);
});
