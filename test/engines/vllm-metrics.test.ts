import { describe, expect, it } from "vitest";
import { parseExposition } from "../../src/engines/prometheus-text.js";
import { readVllmMetrics } from "../../src/engines/vllm-metrics.js";
import { SGLANG_METRICS, VLLM_DP2_METRICS, VLLM_OLD_METRICS } from "./samples.js";

describe("readVllmMetrics", () => {
  it("adds queues and capacities over data-parallel engines, averages KV usage, counts the ranks", () => {
    expect(readVllmMetrics(parseExposition(VLLM_DP2_METRICS))).toEqual({
      engine: "vllm",
      queued: 5,
      running: 5,
      kvUsage: 0.375,
      capacityTokens: (27197 + 27000) * 16,
      dpSize: 2,
    });
  });

  it("reads the pre-0.9 name gpu_cache_usage_perc; num_gpu_blocks None means no capacity yet", () => {
    expect(readVllmMetrics(parseExposition(VLLM_OLD_METRICS))).toEqual({
      engine: "vllm",
      queued: 0,
      running: 1,
      kvUsage: 0.125,
    });
  });

  it("is undefined for another engine's metrics", () => {
    expect(readVllmMetrics(parseExposition(SGLANG_METRICS))).toBeUndefined();
  });
});
