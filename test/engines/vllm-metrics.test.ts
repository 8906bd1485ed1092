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
      blockSizeTokens: 16,
      dpSize: 2,
    });
  });

  it("reads the pre-0.9 name gpu_cache_usage_perc; num_gpu_blocks None means no capacity yet", () => {
    // The block size is known before the engine has profiled its memory.
    expect(readVllmMetrics(parseExposition(VLLM_OLD_METRICS))).toEqual({
      engine: "vllm",
      queued: 0,
      running: 1,
      kvUsage: 0.125,
      blockSizeTokens: 16,
    });
  });

  it("reads the KV block size of cache_config_info, and skips one that is not a positive integer", () => {
    const info = (size: string) =>
      `vllm:num_requests_running 0\nvllm:cache_config_info{block_size="${size}",num_gpu_blocks="10"} 1.0\n`;
    expect(readVllmMetrics(parseExposition(info("32")))?.blockSizeTokens).toBe(32);
    for (const bad of ["0", "-16", "1.5", "None", "1e9"]) {
      expect(readVllmMetrics(parseExposition(info(bad)))?.blockSizeTokens).toBeUndefined();
    }
  });

  it("is undefined for another engine's metrics", () => {
    expect(readVllmMetrics(parseExposition(SGLANG_METRICS))).toBeUndefined();
  });
});
