/**
 * SGLang's /metrics (started with --enable-metrics). Names from SchedulerMetricsCollector in
 * sglang/python/sglang/srt/metrics/collector.py: sglang:num_queue_reqs, sglang:num_running_reqs,
 * sglang:token_usage (fraction of the KV pool in use) and, in recent versions,
 * sglang:max_total_num_tokens. Each scheduler (DP rank) reports its own series.
 */
import type { MetricsReading } from "./engine-reading.js";
import { type MetricFamilies, meanOf, sumOf } from "./prometheus-text.js";

/** undefined when the exposition holds no SGLang scheduler metric. */
export function readSglangMetrics(families: MetricFamilies): MetricsReading | undefined {
  const queued = sumOf(families, "sglang:num_queue_reqs");
  const running = sumOf(families, "sglang:num_running_reqs");
  const kvUsage = meanOf(families, "sglang:token_usage");
  const capacityTokens = sumOf(families, "sglang:max_total_num_tokens");
  if ([queued, running, kvUsage, capacityTokens].every((v) => v === undefined)) {
    return undefined;
  }
  return {
    engine: "sglang",
    ...(queued !== undefined ? { queued } : {}),
    ...(running !== undefined ? { running } : {}),
    ...(kvUsage !== undefined ? { kvUsage } : {}),
    ...(capacityTokens !== undefined ? { capacityTokens } : {}),
  };
}
