/**
 * When the simulated engine's /metrics gauges change (sim/engine-gauges.ts): SGLang sets them at
 * each prefill batch (running before the batch's newcomers join, the queue after they left) and
 * every --decode-log-interval decode steps, and every 30 s while idle; vLLM after every step; "live"
 * at every read. A router that reads them sees the engine as it was at the last update.
 */
import { describe, expect, it } from "vitest";
import { Engine, type SequenceHandle } from "../../sim/engine.js";
import type { GaugeRule } from "../../sim/engine-gauges.js";
import { PrefixKvCache } from "../../sim/kv-cache.js";
import { ManualClock } from "../../sim/manual-clock.js";
import { DEFAULT_TIMING } from "../../sim/timing.js";

function setup(gaugeRule: GaugeRule) {
  const clock = new ManualClock();
  const kv = new PrefixKvCache({ capacityTokens: 100_000, blockSize: 16 });
  const engine = new Engine(
    {
      timing: DEFAULT_TIMING,
      maxRunning: 2,
      maxBatchTokens: 8192,
      delayFactor: () => 1,
      prefillFirst: true,
      gaugeRule,
    },
    kv,
    clock,
  );
  let next = 1000;
  const submit = (maxTokens: number): SequenceHandle =>
    engine.submit({
      promptTokens: Array.from({ length: 64 }, () => next++),
      maxTokens,
      sink: { onToken: () => {}, onFinish: () => {} },
    });
  const reading = () => {
    const { running, waiting } = engine.reported();
    return { running, waiting };
  };
  return { clock, engine, submit, reading };
}

/** Moves the clock in small steps until `done` holds (at most 10 model seconds). */
function advanceUntil(clock: ManualClock, done: () => boolean): void {
  for (let i = 0; i < 40_000 && !done(); i++) clock.advance(0.25);
  expect(done()).toBe(true);
}

describe("the simulated engine's /metrics gauges", () => {
  it("SGLang: a prefill batch sets them without its newcomers, and a decoding batch only every N steps", () => {
    const { clock, engine, submit, reading } = setup({ decodeLogInterval: 4 });
    const first = submit(100);
    // The prefill batch that admitted it: the running batch before it joined, the queue after.
    expect(engine.running).toBe(1);
    expect(reading()).toEqual({ running: 0, waiting: 0 });
    // The prefill and two decode steps done, the third planned: no update since.
    advanceUntil(clock, () => engine.steps === 3);
    expect(reading()).toEqual({ running: 0, waiting: 0 });
    // The fourth decode step planned sets them.
    advanceUntil(clock, () => engine.steps === 4);
    expect(reading()).toEqual({ running: 1, waiting: 0 });
    submit(100);
    submit(100);
    // The next step admits one of the two (a batch of 2): running counts the first alone.
    advanceUntil(clock, () => engine.waiting === 1);
    expect(reading()).toEqual({ running: 1, waiting: 1 });
    // An end is not seen until the next update: here the prefill batch that fills its slot.
    first.abort();
    expect(reading()).toEqual({ running: 1, waiting: 1 });
    advanceUntil(clock, () => engine.waiting === 0);
    expect(engine.running).toBe(2);
    expect(reading()).toEqual({ running: 1, waiting: 0 });
  });

  it("SGLang: ends while the batch only decodes stay in the gauges until the idle update 30 s later", () => {
    const { clock, engine, submit, reading } = setup({ decodeLogInterval: 40 });
    submit(3);
    submit(3);
    advanceUntil(clock, () => engine.running === 0 && engine.waiting === 0);
    // Set by the prefill batch that admitted the second, the first running then.
    expect(reading()).toEqual({ running: 1, waiting: 0 });
    clock.advance(29_000);
    expect(reading()).toEqual({ running: 1, waiting: 0 });
    clock.advance(1_500);
    expect(reading()).toEqual({ running: 0, waiting: 0 });
  });

  it("vLLM: after every step; live: at every read", () => {
    const vllm = setup("step");
    vllm.submit(100);
    // Submitted between steps: counted from the step's end.
    expect(vllm.engine.running).toBe(1);
    expect(vllm.reading()).toEqual({ running: 0, waiting: 0 });
    advanceUntil(vllm.clock, () => vllm.engine.steps === 1);
    expect(vllm.reading()).toEqual({ running: 1, waiting: 0 });
    const live = setup("live");
    live.submit(100);
    live.submit(100);
    live.submit(100);
    // The first submit's step took it; the two after wait for that step's end.
    expect(live.reading()).toEqual({ running: 1, waiting: 2 });
  });
});
