import { describe, expect, it } from "vitest";
import { Engine, type EngineOptions, type SequenceHandle } from "../../sim/engine.js";
import { PrefixKvCache } from "../../sim/kv-cache.js";
import { ManualClock } from "../../sim/manual-clock.js";
import { generatedTokenIds } from "../../sim/output-text.js";
import {
  DEFAULT_TIMING,
  decodeStepMs,
  estimateLatency,
  prefillMs,
  type TimingModel,
} from "../../sim/timing.js";

interface Trace {
  admittedAt?: number;
  cached?: number;
  tokenTimes: number[];
  finishedAt?: number;
}

function setup(
  o: {
    maxRunning?: number;
    maxBatchTokens?: number;
    capacityTokens?: number;
    factor?: () => number;
    timing?: TimingModel;
    onStep?: EngineOptions["onStep"];
    firstTokenDelayMs?: number;
  } = {},
) {
  const clock = new ManualClock();
  const kv = new PrefixKvCache({ capacityTokens: o.capacityTokens ?? 100_000, blockSize: 16 });
  const timing = o.timing ?? DEFAULT_TIMING;
  const engine = new Engine(
    {
      timing,
      maxRunning: o.maxRunning ?? 256,
      maxBatchTokens: o.maxBatchTokens ?? 8192,
      delayFactor: o.factor ?? (() => 1),
      ...(o.onStep === undefined ? {} : { onStep: o.onStep }),
      ...(o.firstTokenDelayMs === undefined ? {} : { firstTokenDelayMs: o.firstTokenDelayMs }),
    },
    kv,
    clock,
  );
  const submit = (prompt: number[], maxTokens: number): [SequenceHandle, Trace] => {
    const trace: Trace = { tokenTimes: [] };
    const handle = engine.submit({
      promptTokens: prompt,
      maxTokens,
      sink: {
        onAdmit: (cached) => {
          trace.admittedAt = clock.now();
          trace.cached = cached;
        },
        onToken: () => trace.tokenTimes.push(clock.now()),
        onFinish: () => {
          trace.finishedAt = clock.now();
        },
      },
    });
    return [handle, trace];
  };
  return { clock, kv, engine, submit, timing };
}

/** A prompt of `n` token ids, distinct per `seed`. */
function prompt(n: number, seed = 0): number[] {
  return Array.from({ length: n }, (_, i) => (seed * 7919 + i * 31) % 128_000);
}

describe("engine: timing of prefill and decode", () => {
  it("charges prefill only for uncached tokens: a repeated long prompt has a far shorter TTFT", () => {
    const { clock, submit, timing } = setup();
    const p = prompt(4096);
    const [, first] = submit(p, 1);
    clock.runAll();
    const [, second] = submit(p, 1);
    const start = clock.now();
    clock.runAll();

    expect(first.cached).toBe(0);
    expect(first.tokenTimes[0]).toBe(prefillMs(timing, 4096, 0));
    expect(second.cached).toBe(4080); // every full block but the last: one token must be computed
    expect((second.tokenTimes[0] as number) - start).toBeCloseTo(prefillMs(timing, 16, 4080), 9);
    expect(prefillMs(timing, 16, 4080)).toBeLessThan(prefillMs(timing, 4096, 0) / 10);
  });

  it("firstTokenDelayMs: the first token comes the delay (× delay factor) later than without it", () => {
    const { clock, submit, timing } = setup({ firstTokenDelayMs: 50, factor: () => 2 });
    const [, t] = submit(prompt(100), 3);
    clock.runAll();
    expect(t.tokenTimes[0]).toBe(100 + 2 * prefillMs(timing, 100));
    expect(t.tokenTimes).toHaveLength(3);
  });

  it("emits the first token at the end of prefill, then one token per decode step", () => {
    const { clock, submit, timing } = setup();
    const [, t] = submit(prompt(100), 4);
    clock.runAll();
    expect(t.tokenTimes).toHaveLength(4);
    const ttft = prefillMs(timing, 100);
    expect(t.tokenTimes[0]).toBe(ttft);
    const gap = (t.tokenTimes[1] as number) - (t.tokenTimes[0] as number);
    expect(gap).toBeCloseTo(decodeStepMs(timing, 1, 101), 9);
    expect(t.finishedAt).toBe(t.tokenTimes[3]);
    const est = estimateLatency(timing, {
      promptTokens: 100,
      cachedTokens: 0,
      outputTokens: 4,
      maxBatchTokens: 8192,
    });
    expect(t.finishedAt).toBeCloseTo(est.totalMs, 9);
  });

  it("splits a long prompt into chunks of maxBatchTokens (chunked prefill)", () => {
    const { clock, engine, submit, timing } = setup({ maxBatchTokens: 8192 });
    const [, t] = submit(prompt(20_000), 1);
    clock.runAll();
    expect(engine.steps).toBe(3);
    const est = estimateLatency(timing, {
      promptTokens: 20_000,
      cachedTokens: 0,
      outputTokens: 1,
      maxBatchTokens: 8192,
    });
    expect(t.tokenTimes[0]).toBeCloseTo(est.ttftMs, 9);
  });

  it("tells onStep of every step: its start, duration and shape (a chunked prefill, then decode)", () => {
    const steps: { start: number; duration: number; prefill: number; decode: number }[] = [];
    const { clock, submit } = setup({
      maxBatchTokens: 8192,
      onStep: (start, duration, shape) =>
        steps.push({
          start,
          duration,
          prefill: shape.prefillTokens,
          decode: shape.decodeSeqs,
        }),
    });
    const [, t] = submit(prompt(10_000), 2);
    clock.runAll();
    expect(steps.map((s) => [s.prefill, s.decode])).toEqual([
      [8192, 0],
      [1808, 0],
      [0, 1],
    ]);
    // Steps run back to back; the first token comes at the end of the last prefill step.
    expect(steps[1]!.start).toBeCloseTo(steps[0]!.duration, 9);
    expect(t.tokenTimes[0]).toBeCloseTo(steps[1]!.start + steps[1]!.duration, 9);
    expect(t.finishedAt).toBeCloseTo(steps[2]!.start + steps[2]!.duration, 9);
  });

  it("decode steps slow down mildly as the batch grows", () => {
    expect(decodeStepMs(DEFAULT_TIMING, 64, 64 * 2000)).toBeGreaterThan(
      decodeStepMs(DEFAULT_TIMING, 1, 2000),
    );
    expect(decodeStepMs(DEFAULT_TIMING, 64, 64 * 2000)).toBeLessThan(
      3 * decodeStepMs(DEFAULT_TIMING, 1, 2000),
    );
  });
});

describe("engine: continuous batching and queueing", () => {
  it("keeps requests beyond maxRunning waiting (FIFO) until a slot frees", () => {
    const { clock, engine, submit } = setup({ maxRunning: 2 });
    const traces = [
      submit(prompt(64, 1), 4)[1],
      submit(prompt(64, 2), 4)[1],
      submit(prompt(64, 3), 4)[1],
    ];
    // The first arrival starts a step at once; the others join at the next step boundary.
    expect(engine.running).toBe(1);
    expect(engine.waiting).toBe(2);
    clock.advance(prefillMs(DEFAULT_TIMING, 64)); // the first step ends
    expect(engine.running).toBe(2);
    expect(engine.waiting).toBe(1);
    clock.runAll();
    const [a, b, c] = traces as [Trace, Trace, Trace];
    expect(a.finishedAt).toBeDefined();
    expect(b.finishedAt).toBeDefined();
    expect(c.admittedAt as number).toBeGreaterThanOrEqual(a.finishedAt as number);
    expect(c.admittedAt as number).toBeGreaterThan(b.admittedAt as number);
    expect(engine.running + engine.waiting).toBe(0);
  });

  it("makes a request wait for KV room even with free batch slots", () => {
    // 40 blocks of 16 = 640 tokens; each request needs 25 blocks for prompt + output.
    const { clock, engine, submit } = setup({ capacityTokens: 640 });
    const [, a] = submit(prompt(300, 1), 100);
    const [, b] = submit(prompt(300, 2), 100);
    clock.advance(100); // a is decoding (its 100 tokens take ~600 ms); b found no KV room
    expect(a.tokenTimes.length).toBeGreaterThan(0);
    expect(engine.running).toBe(1);
    expect(engine.waiting).toBe(1);
    clock.runAll();
    expect(b.admittedAt as number).toBeGreaterThanOrEqual(a.finishedAt as number);
  });

  it("frees the batch slot and the KV pins of an aborted request", () => {
    const { clock, engine, kv, submit } = setup({ maxRunning: 1 });
    const [a] = submit(prompt(64, 1), 1000);
    const [, b] = submit(prompt(64, 2), 2);
    clock.advance(50);
    expect(engine.running).toBe(1);
    expect(engine.waiting).toBe(1);
    expect(kv.pinnedBlocks + kv.reservedBlocks).toBeGreaterThan(0);
    a.abort();
    expect(a.state).toBe("aborted");
    expect(engine.running).toBe(0);
    clock.runAll();
    expect(b.finishedAt).toBeDefined();
    expect(kv.pinnedBlocks).toBe(0);
    expect(kv.reservedBlocks).toBe(0);
  });

  it("aborting a waiting request removes it from the queue", () => {
    const { clock, engine, submit } = setup({ maxRunning: 1 });
    submit(prompt(64, 1), 3);
    const [b, tb] = submit(prompt(64, 2), 3);
    b.abort();
    expect(engine.waiting).toBe(0);
    clock.runAll();
    expect(tb.admittedAt).toBeUndefined();
    expect(tb.tokenTimes).toHaveLength(0);
  });
});

describe("engine: delays", () => {
  it("multiplies every step by the delay factor (timeScale × slowdown)", () => {
    let factor = 1;
    const { clock, submit, timing } = setup({ factor: () => factor });
    const [, normal] = submit(prompt(100, 1), 1);
    clock.runAll();
    factor = 3;
    const start = clock.now();
    const [, slow] = submit(prompt(100, 2), 1);
    clock.runAll();
    expect(normal.tokenTimes[0]).toBe(prefillMs(timing, 100));
    expect((slow.tokenTimes[0] as number) - start).toBeCloseTo(3 * prefillMs(timing, 100), 9);
  });

  it("with a zero delay factor, finishes a request before submit returns", () => {
    const { clock, submit } = setup({ factor: () => 0 });
    const [handle, t] = submit(prompt(500), 50);
    expect(handle.state).toBe("finished");
    expect(t.tokenTimes).toHaveLength(50);
    expect(clock.pendingTimers).toBe(0);
  });

  it("catches up on late timers by running the missed steps back to back", () => {
    const { clock, engine, submit } = setup();
    const [, t] = submit(prompt(100), 10);
    clock.advanceLate(10_000); // far past the whole request: one timer, all ten steps
    expect(t.tokenTimes).toHaveLength(10);
    expect(engine.steps).toBe(10);
    expect(clock.fired).toBe(1);
  });
});

describe("engine: prefix cache interplay", () => {
  it("caches the generated tokens too, so a follow-up that re-sends the reply hits them", () => {
    const { clock, kv, submit } = setup();
    const p = prompt(100);
    submit(p, 40);
    clock.runAll();
    const followUp = [...p, ...generatedTokenIds(40), ...prompt(30, 9)];
    // 140 tokens of history → 8 full blocks (128 tokens) cached.
    expect(kv.cachedPrefixTokens(followUp)).toBe(128);
  });

  it("runs a prefill-only sequence (maxTokens 0) without emitting tokens", () => {
    const { clock, submit } = setup();
    const [handle, t] = submit(prompt(64), 0);
    clock.runAll();
    expect(handle.state).toBe("finished");
    expect(t.tokenTimes).toHaveLength(0);
    expect(t.finishedAt).toBe(prefillMs(DEFAULT_TIMING, 64));
  });

  it("refuses a request larger than the whole KV pool", () => {
    const { engine } = setup({ capacityTokens: 640 });
    expect(engine.fits(600, 40)).toBe(true);
    expect(engine.fits(600, 41)).toBe(false);
    expect(() =>
      engine.submit({
        promptTokens: prompt(700),
        maxTokens: 1,
        sink: { onToken() {}, onFinish() {} },
      }),
    ).toThrow(RangeError);
  });
});

describe("step rules: SGLang's prefill first, vLLM's mixed steps", () => {
  /** The steps' shapes when a long prompt arrives while another sequence decodes. */
  function shapes(prefillFirst: boolean) {
    const clock = new ManualClock();
    const kv = new PrefixKvCache({ capacityTokens: 100_000, blockSize: 16 });
    const steps: { prefill: number; decode: number; ms: number }[] = [];
    const engine = new Engine(
      {
        timing: DEFAULT_TIMING,
        maxRunning: 8,
        maxBatchTokens: 2048,
        delayFactor: () => 1,
        prefillFirst,
        onStep: (_start, ms, shape) =>
          steps.push({ prefill: shape.prefillTokens, decode: shape.decodeSeqs, ms }),
      },
      kv,
      clock,
    );
    const sink = { onToken: () => {}, onFinish: () => {} };
    engine.submit({ promptTokens: prompt(100, 1), maxTokens: 8, sink });
    // Its prefill step ends (its first token) and its first decode step is planned.
    clock.advance((steps[0] as { ms: number }).ms);
    engine.submit({ promptTokens: prompt(3000, 2), maxTokens: 1, sink });
    clock.advanceLate(60_000);
    return steps.map(({ prefill, decode }) => ({ prefill, decode }));
  }

  it("prefill-first runs each prefill chunk alone and decodes only in steps without one", () => {
    const steps = shapes(true);
    expect(steps.slice(0, 4)).toEqual([
      { prefill: 100, decode: 0 },
      { prefill: 0, decode: 1 },
      { prefill: 2048, decode: 0 },
      { prefill: 952, decode: 0 },
    ]);
  });

  it("mixed (the default) decodes the running sequences in every step beside the prefill", () => {
    const steps = shapes(false);
    expect(steps.slice(0, 4)).toEqual([
      { prefill: 100, decode: 0 },
      { prefill: 0, decode: 1 },
      { prefill: 2047, decode: 1 },
      { prefill: 953, decode: 1 },
    ]);
  });
});

describe("loads from the CPU tier: vLLM's asynchronous load, SGLang's layer-wise overlap", () => {
  const BS = 16;
  /** A GPU pool of 400 blocks behind a CPU tier of 4000, with `loadRule`; steps recorded. */
  function tiered(loadRule: EngineOptions["loadRule"]) {
    const clock = new ManualClock();
    const kv = new PrefixKvCache({
      capacityTokens: 400 * BS,
      blockSize: BS,
      cpuTierTokens: 4000 * BS,
    });
    const steps: { start: number; duration: number; prefill: number; decodes: number }[] = [];
    const engine = new Engine(
      {
        timing: DEFAULT_TIMING,
        maxRunning: 256,
        maxBatchTokens: 8192,
        delayFactor: () => 1,
        ...(loadRule === undefined ? {} : { loadRule }),
        onStep: (start, duration, shape) =>
          steps.push({ start, duration, prefill: shape.prefillTokens, decodes: shape.decodeSeqs }),
      },
      kv,
      clock,
    );
    const run = (p: number[], maxTokens: number) => {
      const times: number[] = [];
      let cached = -1;
      engine.submit({
        promptTokens: p,
        maxTokens,
        sink: {
          onAdmit: (c) => (cached = c),
          onToken: () => times.push(clock.now()),
          onFinish() {},
        },
      });
      return { times, cached: () => cached };
    };
    // `a` (240 blocks) is computed, then pushed off the GPU (not off the CPU tier) by `b`.
    const a = prompt(240 * BS + 1, 1);
    run(a, 1);
    clock.runAll();
    run(prompt(300 * BS + 1, 2), 1);
    clock.runAll();
    expect(kv.cachedPrefixTokens(a)).toBe(240 * BS);
    steps.length = 0;
    const before = kv.loadedBlocks;
    /** Tokens loaded from the CPU tier since the setup. */
    const loaded = () => (kv.loadedBlocks - before) * BS;
    return { clock, kv, steps, run, a, loaded };
  }
  const loadMs = (tokens: number) => (tokens * 1000) / DEFAULT_TIMING.offloadTokensPerSec;

  it("async (vLLM, the default): the batch keeps decoding while a hit loads; the hit joins a step once loaded", () => {
    const { clock, steps, run, a, loaded } = tiered(undefined);
    const decoding = run(prompt(33, 3), 30);
    clock.advance(prefillMs(DEFAULT_TIMING, 33) + 1); // prefilled; now decoding
    const start = clock.now();
    const hit = run(a, 1);
    clock.runAll();
    expect(hit.cached()).toBe(240 * BS);
    // Most of `a` comes back from the CPU tier (its first blocks outlived the rest on the GPU).
    expect(loaded()).toBeGreaterThan(100 * BS);
    // Every step is a plain decode or a 1-token prefill: the transfer never lengthens one.
    for (const s of steps) expect(s.duration).toBeLessThan(loadMs(loaded()) / 2);
    const after = decoding.times.filter((t) => t > start && t < hit.times[0]!);
    expect(after.length).toBeGreaterThan(1);
    // First token: the next step boundary, the transfer, then a step of its own.
    expect(hit.times[0]! - start).toBeGreaterThanOrEqual(loadMs(loaded()));
    expect(hit.times[0]! - start).toBeLessThan(loadMs(loaded()) + 3 * DEFAULT_TIMING.stepFloorMs);
  });

  it("async: a hit on an idle engine waits for its transfer, then one short step; far below a prefill", () => {
    const { clock, run, a, loaded } = tiered("async");
    const start = clock.now();
    const hit = run(a, 1);
    clock.runAll();
    const ttft = hit.times[0]! - start;
    expect(ttft).toBeCloseTo(loadMs(loaded()) + prefillMs(DEFAULT_TIMING, 1, 240 * BS), 6);
    expect(ttft).toBeLessThan(prefillMs(DEFAULT_TIMING, a.length) / 2);
  });

  it("layerwise (SGLang HiCache): the step that admits a hit lasts the longer of its compute and the transfer", () => {
    const { clock, steps, run, a, loaded } = tiered("layerwise");
    const start = clock.now();
    const hit = run(a, 1);
    clock.runAll();
    expect(steps[0]!.duration).toBeCloseTo(
      Math.max(loadMs(loaded()), prefillMs(DEFAULT_TIMING, 1, 240 * BS)),
      6,
    );
    expect(hit.times[0]! - start).toBeCloseTo(steps[0]!.duration, 6);
  });
});
