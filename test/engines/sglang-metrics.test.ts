import { describe, expect, it } from "vitest";
import { parseExposition } from "../../src/engines/prometheus-text.js";
import { readSglangMetrics } from "../../src/engines/sglang-metrics.js";
import { SGLANG_METRICS, SGLANG_OLD_METRICS, VLLM_DP2_METRICS } from "./samples.js";

describe("readSglangMetrics", () => {
  it("adds queues and pools over DP ranks and averages usage", () => {
    const reading = readSglangMetrics(parseExposition(SGLANG_METRICS));
    expect(reading).toMatchObject({
      engine: "sglang",
      queued: 2,
      running: 14,
      capacityTokens: 1_000_000,
    });
    expect(reading?.kvUsage).toBeCloseTo(0.2);
  });

  it("keeps each DP rank's series apart by its dp_rank label (issue 20 item 8)", () => {
    const reading = readSglangMetrics(parseExposition(SGLANG_METRICS));
    expect(reading?.dpSize).toBe(2);
    expect(reading?.ranks).toEqual([
      { queued: 2, running: 8, kvUsage: 0.3, capacityTokens: 500_000 },
      { queued: 0, running: 6, kvUsage: 0.1, capacityTokens: 500_000 },
    ]);
    expect(readSglangMetrics(parseExposition(SGLANG_OLD_METRICS))?.ranks).toBeUndefined();
  });

  it("reads an older SGLang without the max_total_num_tokens gauge", () => {
    expect(readSglangMetrics(parseExposition(SGLANG_OLD_METRICS))).toEqual({
      engine: "sglang",
      queued: 3,
      running: 1,
      kvUsage: 0.02,
    });
  });

  it("is undefined for another engine's metrics", () => {
    expect(readSglangMetrics(parseExposition(VLLM_DP2_METRICS))).toBeUndefined();
  });
});
