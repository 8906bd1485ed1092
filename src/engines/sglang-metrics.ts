/**
 * SGLang's /metrics (started with --enable-metrics). Names from SchedulerMetricsCollector in
 * sglang/python/sglang/srt/metrics/collector.py: sglang:num_queue_reqs, sglang:num_running_reqs,
 * sglang:token_usage (fraction of the KV pool in use) and, in recent versions,
 * sglang:max_total_num_tokens. Each scheduler (DP rank) reports its own series, labelled `dp_rank`
 * when dp_size > 1 (init_metrics in python/sglang/srt/managers/scheduler_metrics_mixin.py): the
 * worker's figures add them up, and each rank's stay apart in `ranks`.
 * With --enable-lora, `sglang:lora_pool_slots_total` is its adapter slots (max_loras_per_batch);
 * the pool gauges count slots and never name adapters (collector.py, "LoRA pool metrics").
 */
import type { MetricsReading } from "./engine-reading.js";
import { type MetricFamilies, meanOf, sumOf } from "./prometheus-text.js";
import { perRank, rankReadings } from "./rank-readings.js";

/** undefined when the exposition holds no SGLang scheduler metric. */
export function readSglangMetrics(families: MetricFamilies): MetricsReading | undefined {
  const queued = sumOf(families, "sglang:num_queue_reqs");
  const running = sumOf(families, "sglang:num_running_reqs");
  const kvUsage = meanOf(families, "sglang:token_usage");
  const capacityTokens = sumOf(families, "sglang:max_total_num_tokens");
  // One scheduler's pool (each rank has the same); summing ranks would overstate it.
  const loraSlots = meanOf(families, "sglang:lora_pool_slots_total");
  if ([queued, running, kvUsage, capacityTokens].every((v) => v === undefined)) {
    return undefined;
  }
  const ranks = rankReadings({
    queued: perRank(families, "dp_rank", ["sglang:num_queue_reqs"]),
    running: perRank(families, "dp_rank", ["sglang:num_running_reqs"]),
    kvUsage: perRank(families, "dp_rank", ["sglang:token_usage"], true),
    capacityTokens: perRank(families, "dp_rank", ["sglang:max_total_num_tokens"]),
  });
  return {
    engine: "sglang",
    ...(queued !== undefined ? { queued } : {}),
    ...(running !== undefined ? { running } : {}),
    ...(kvUsage !== undefined ? { kvUsage } : {}),
    ...(capacityTokens !== undefined ? { capacityTokens } : {}),
    ...(ranks !== undefined ? { ranks, dpSize: ranks.length } : {}),
    ...(loraSlots !== undefined && loraSlots >= 1
      ? { lora: { active: [], maxLoras: Math.round(loraSlots) } }
      : {}),
  };
}
