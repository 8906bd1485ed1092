/**
 * --queue-when-saturated with prefill/decode pairs behaves as it does without them: while the
 * engine that would run the request (a regular worker, or the pair's decode side) is full and
 * queueing, the router holds the request, and lets it go once that engine has room. Real
 * sockets, simulated engines with a running batch of 1, readings taken by hand.
 */
import { describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import type { RunningRouter } from "../../src/server.js";
import { startedPerTest } from "../faults/support.js";
import { HOLD_AT_FULL_BATCH } from "../helpers/admission-settings.js";
import { startTestRouter, waitFor } from "../helpers/router.js";
import { queueGauge } from "../helpers/sim-gauges.js";

const MODEL = "meta-llama/Llama-3.1-8B-Instruct";

function complete(router: RunningRouter, prompt: string, maxTokens: number, signal: AbortSignal) {
  return fetch(`${router.url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: MODEL, prompt, max_tokens: maxTokens, stream: maxTokens > 2 }),
    signal,
  });
}

type Mode = "regular" | "sglang" | "vllm";

/** The router and the engine that runs the requests (the decode side of a pair). */
async function fleet(mode: Mode, started: ReturnType<typeof startedPerTest>) {
  const flavor = mode === "vllm" ? "vllm" : "sglang";
  if (mode === "regular") {
    const engine = await startSimWorker({ id: "one", flavor, maxRunning: 1 });
    started.sims = [engine];
    started.router = await startTestRouter({ workerUrls: [engine.url], ...HOLD_AT_FULL_BATCH });
    return { router: started.router, engine };
  }
  const prefill = await startSimWorker({ id: "p", flavor, role: "prefill", timeScale: 0 });
  const engine: SimWorker = await startSimWorker({
    id: "d",
    flavor,
    role: "decode",
    maxRunning: 1,
  });
  started.sims = [prefill, engine];
  started.router = await startTestRouter({
    ...(mode === "sglang" ? { pdDisaggregation: true } : { vllmPdDisaggregation: true }),
    prefill: [{ url: prefill.url, bootstrapPort: prefill.bootstrapPort ?? null }],
    decode: [engine.url],
    ...HOLD_AT_FULL_BATCH,
  });
  return { router: started.router, engine };
}

describe("--queue-when-saturated: a pair's request is held as a regular one is", () => {
  const started = startedPerTest();

  for (const mode of ["regular", "sglang", "vllm"] as const) {
    it(`${mode}: held while the engine is full and queueing, let go once it has room`, async () => {
      const { router, engine } = await fleet(mode, started);
      const admission = router.context.admission;
      const longs = new AbortController();
      const stop = new AbortController();
      try {
        // Two long streams: one runs, one waits in the engine's queue; a reading shows it.
        const running = ["first long", "second long"].map((p) =>
          complete(router, p, 100_000, longs.signal).catch(() => undefined),
        );
        await waitFor(
          () => engine.stats().running === 1 && engine.stats().waiting === 1,
          10_000,
          "the engine full and queueing",
        );
        const flavor = mode === "vllm" ? "vllm" : "sglang";
        await waitFor(
          async () => (await queueGauge(engine.url, flavor)) === 1,
          10_000,
          "the engine's queue gauge",
        );
        await router.context.introspection.pollAll();
        const held = complete(router, "a short one", 2, stop.signal);
        await waitFor(() => admission.waiting === 1, 10_000, "the request held by the router");
        const before = engine.stats().requests;
        // The long work ends: the engine has room, the held request goes and is answered.
        longs.abort();
        await Promise.allSettled(running);
        const res = await held;
        expect(res.status).toBe(200);
        await res.text();
        expect(admission.waiting).toBe(0);
        expect(engine.stats().requests).toBe(before + 1);
      } finally {
        longs.abort();
        stop.abort();
      }
    }, 40_000);
  }
});
