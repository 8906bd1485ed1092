import { describe, expect, it } from "vitest";
import {
  DEFAULT_TIMING,
  decodeStepMs,
  estimateLatency,
  prefillMs,
  stepDurationMs,
} from "../../sim/timing.js";

const m = DEFAULT_TIMING;

describe("timing model", () => {
  it("prefill costs max(floor, uncached tokens / throughput)", () => {
    expect(prefillMs(m, 3000)).toBeCloseTo((3000 / m.prefillTokensPerSec) * 1000, 9);
    expect(prefillMs(m, 10)).toBeGreaterThanOrEqual(m.stepFloorMs);
    expect(prefillMs(m, 10)).toBeLessThan(m.stepFloorMs + 1);
  });

  it("loading tokens from the CPU tier costs a transfer, overlapped with the step, well below computing them", () => {
    const shape = { prefillTokens: 16, decodeSeqs: 0, seqs: 1, contextTokens: 6016 };
    const loaded = stepDurationMs(m, { ...shape, loadedTokens: 6000 });
    const computed = stepDurationMs(m, { ...shape, prefillTokens: 6016 });
    expect(loaded).toBeGreaterThan(stepDurationMs(m, shape));
    expect(loaded).toBeLessThan(computed / 3);
    // Layer by layer beside the step's compute (SGLang's HiCache): the longer of the two.
    expect(loaded).toBeCloseTo((6000 * 1000) / m.offloadTokensPerSec, 9);
  });

  it("an uncached long prompt takes far longer to prefill than the same prompt cached", () => {
    const uncached = estimateLatency(m, {
      promptTokens: 8000,
      cachedTokens: 0,
      outputTokens: 1,
      maxBatchTokens: 8192,
    });
    const cached = estimateLatency(m, {
      promptTokens: 8000,
      cachedTokens: 7984,
      outputTokens: 1,
      maxBatchTokens: 8192,
    });
    expect(uncached.ttftMs).toBeGreaterThan(200);
    expect(cached.ttftMs).toBeLessThan(10);
  });

  it("decode steps are memory-bound and grow mildly with batch and context", () => {
    const one = decodeStepMs(m, 1, 1000);
    const many = decodeStepMs(m, 64, 64 * 2000);
    expect(one).toBeGreaterThanOrEqual(m.stepFloorMs);
    expect(many).toBeGreaterThan(one);
    // Llama-3.1-8B on one H100 at moderate batch: ~10-15 ms per step.
    expect(many).toBeGreaterThan(10);
    expect(many).toBeLessThan(15);
  });

  it("a mixed step costs the larger of compute and memory time; an empty step costs nothing", () => {
    const shape = { prefillTokens: 4000, decodeSeqs: 10, seqs: 11, contextTokens: 30_000 };
    const compute = (4010 / m.prefillTokensPerSec) * 1000;
    expect(stepDurationMs(m, shape)).toBeCloseTo(compute, 9);
    expect(stepDurationMs(m, { prefillTokens: 0, decodeSeqs: 0, seqs: 0, contextTokens: 0 })).toBe(
      0,
    );
  });

  it("estimates TPOT from decode steps after the first token", () => {
    const e = estimateLatency(m, {
      promptTokens: 100,
      cachedTokens: 0,
      outputTokens: 11,
      maxBatchTokens: 8192,
    });
    expect(e.tpotMs).toBeGreaterThan(m.stepFloorMs);
    expect(e.totalMs).toBeCloseTo(e.ttftMs + 10 * e.tpotMs, 9);
  });
});
