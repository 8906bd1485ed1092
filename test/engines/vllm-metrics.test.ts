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
      ranks: [
        { queued: 4, running: 3, kvUsage: 0.5, capacityTokens: 27197 * 16 },
        { queued: 1, running: 2, kvUsage: 0.25, capacityTokens: 27000 * 16 },
      ],
    });
  });

  it("keeps each data-parallel engine's series apart by its engine label (issue 20 item 8)", () => {
    // Rank 1 reports a queue and no cache config; a label that is not a rank is not one.
    const text =
      'vllm:num_requests_waiting{engine="0"} 0.0\nvllm:num_requests_waiting{engine="1"} 7.0\n' +
      'vllm:num_requests_waiting{engine="x"} 99.0\n' +
      'vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="100"} 1.0\n';
    expect(readVllmMetrics(parseExposition(text))?.ranks).toEqual([
      { queued: 0, capacityTokens: 1600 },
      { queued: 7 },
    ]);
    // One engine, or no engine label: no per-rank readings.
    expect(readVllmMetrics(parseExposition(VLLM_OLD_METRICS))?.ranks).toBeUndefined();
    expect(
      readVllmMetrics(parseExposition('vllm:num_requests_waiting{engine="0"} 3.0\n'))?.ranks,
    ).toBeUndefined();
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

describe("readVllmMetrics: vllm:lora_requests_info", () => {
  it("reads the latest series: running and waiting adapters, and max_lora", () => {
    const text =
      "vllm:num_requests_running 1.0\n" +
      'vllm:lora_requests_info{max_lora="4",running_lora_adapters="old",waiting_lora_adapters=""} 1700000000.0\n' +
      'vllm:lora_requests_info{max_lora="4",running_lora_adapters="sql,chat",waiting_lora_adapters="math"} 1700000005.0\n';
    expect(readVllmMetrics(parseExposition(text))?.lora).toEqual({
      active: ["sql", "chat", "math"],
      maxLoras: 4,
    });
  });

  it("nothing when the engine runs without LoRA", () => {
    expect(readVllmMetrics(parseExposition("vllm:num_requests_running 1.0\n"))?.lora).toBe(
      undefined,
    );
  });
});
