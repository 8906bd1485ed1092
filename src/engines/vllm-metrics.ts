/**
 * vLLM's /metrics. Names from PrometheusStatLogger in vllm/v1/metrics/loggers.py:
 * vllm:num_requests_waiting, vllm:num_requests_running, vllm:kv_cache_usage_perc (before 0.9:
 * vllm:gpu_cache_usage_perc, also what the V0 engine exposes), and the info gauge
 * vllm:cache_config_info (log_metrics_info("cache_config", ...)), whose labels are the CacheConfig
 * fields as strings: block_size and num_gpu_blocks give the capacity in tokens. With data
 * parallelism every engine reports its own series (label `engine`, the engine's data-parallel
 * rank), so counts and capacities add, and the highest `engine` + 1 is the data-parallel size.
 */
import type { MetricsReading } from "./engine-reading.js";
import { type MetricFamilies, meanOf, sumOf } from "./prometheus-text.js";
import { perRank, rankOfLabel, rankReadings } from "./rank-readings.js";

const WAITING = ["vllm:num_requests_waiting"];
const RUNNING = ["vllm:num_requests_running"];
const KV_USAGE = ["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"];

/** undefined when the exposition holds no vLLM scheduler metric. */
export function readVllmMetrics(families: MetricFamilies): MetricsReading | undefined {
  const queued = sumOf(families, ...WAITING);
  const running = sumOf(families, ...RUNNING);
  const kvUsage = meanOf(families, ...KV_USAGE);
  const capacityTokens = cacheConfigCapacity(families);
  const blockSizeTokens = cacheConfigBlockSize(families);
  if ([queued, running, kvUsage, capacityTokens].every((v) => v === undefined)) return undefined;
  const dpSize = engineCount(families);
  const ranks = rankReadings({
    queued: perRank(families, "engine", WAITING),
    running: perRank(families, "engine", RUNNING),
    kvUsage: perRank(families, "engine", KV_USAGE, true),
    capacityTokens: cacheConfigCapacity(families, true),
  });
  return {
    engine: "vllm",
    ...(queued !== undefined ? { queued } : {}),
    ...(running !== undefined ? { running } : {}),
    ...(kvUsage !== undefined ? { kvUsage } : {}),
    ...(capacityTokens !== undefined ? { capacityTokens } : {}),
    ...(blockSizeTokens !== undefined ? { blockSizeTokens } : {}),
    ...(dpSize !== undefined ? { dpSize } : {}),
    ...(ranks !== undefined ? { ranks } : {}),
    ...loraInfo(families),
  };
}

/**
 * vllm:lora_requests_info (vllm/v1/metrics/loggers.py): an info gauge whose labels are
 * `running_lora_adapters` and `waiting_lora_adapters` (names joined by ",") and `max_lora`, set to
 * the time of the engine step that reported them; older label sets may linger, so the series
 * with the highest value is the current one.
 */
function loraInfo(families: MetricFamilies): { lora?: { active: string[]; maxLoras?: number } } {
  let latest: Record<string, string> | undefined;
  let at = Number.NEGATIVE_INFINITY;
  for (const { labels, value } of families.get("vllm:lora_requests_info") ?? []) {
    if (value >= at) {
      at = value;
      latest = labels;
    }
  }
  if (latest === undefined) return {};
  const names = (list: string | undefined) => (list ?? "").split(",").filter((name) => name !== "");
  const active = [
    ...new Set([...names(latest.running_lora_adapters), ...names(latest.waiting_lora_adapters)]),
  ];
  const max = Number(latest.max_lora);
  return {
    lora: { active, ...(Number.isInteger(max) && max > 0 ? { maxLoras: max } : {}) },
  };
}

/** Highest `engine` label of the running-requests gauge + 1, when above 1 (data parallelism). */
function engineCount(families: MetricFamilies): number | undefined {
  let highest = -1;
  for (const { labels } of families.get("vllm:num_requests_running") ?? []) {
    const engine = Number(labels.engine);
    if (Number.isInteger(engine) && engine >= 0 && engine < 1024)
      highest = Math.max(highest, engine);
  }
  return highest >= 1 ? highest + 1 : undefined;
}

/**
 * num_gpu_blocks × block_size summed over the series of vllm:cache_config_info; undefined when
 * absent or not yet known (num_gpu_blocks is "None" until the engine has profiled its memory).
 */
function cacheConfigCapacity(families: MetricFamilies): number | undefined;
/** The same per `engine` label (each data-parallel engine's own cache). */
function cacheConfigCapacity(
  families: MetricFamilies,
  byRank: true,
): Map<number, number> | undefined;
function cacheConfigCapacity(
  families: MetricFamilies,
  byRank = false,
): number | Map<number, number> | undefined {
  const samples = families.get("vllm:cache_config_info");
  if (samples === undefined) return undefined;
  let total: number | undefined;
  const ranks = new Map<number, number>();
  for (const { labels } of samples) {
    const blocks = Number(labels.num_gpu_blocks);
    const blockSize = Number(labels.block_size);
    if (!Number.isFinite(blocks) || !Number.isFinite(blockSize) || blocks < 0 || blockSize <= 0) {
      continue;
    }
    total = (total ?? 0) + blocks * blockSize;
    const rank = rankOfLabel(labels.engine);
    if (rank !== undefined) ranks.set(rank, (ranks.get(rank) ?? 0) + blocks * blockSize);
  }
  if (byRank) return ranks.size > 0 ? ranks : undefined;
  return total;
}

/**
 * block_size of vllm:cache_config_info (tokens a KV block; every engine of one server shares it,
 * the first valid series answers): GIE's approximate prefix producer sizes its blocks from it
 * (approximateprefix, autoTune). undefined when absent or not a positive integer.
 */
function cacheConfigBlockSize(families: MetricFamilies): number | undefined {
  for (const { labels } of families.get("vllm:cache_config_info") ?? []) {
    const blockSize = Number(labels.block_size);
    if (Number.isSafeInteger(blockSize) && blockSize > 0 && blockSize <= 65_536) return blockSize;
  }
  return undefined;
}
