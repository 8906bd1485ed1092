/**
 * A data-parallel engine's /metrics carry one series per rank, told apart by a label: vLLM's
 * `engine` (the engine index, which is its data-parallel rank: PrometheusStatLogger in
 * vllm/v1/metrics/loggers.py), SGLang's `dp_rank` (set when dp_size > 1: init_metrics in
 * python/sglang/srt/managers/scheduler_metrics_mixin.py). This file groups the series by that
 * label so that each rank's queue, running batch, KV usage and capacity stay its own.
 */
import type { RankReading } from "./engine-reading.js";
import type { MetricFamilies } from "./prometheus-text.js";

/** More ranks than this are not believed (a label that is not a rank). */
export const MAX_RANK_LABEL = 1024;

/** The rank a series' label names; undefined when absent or not a small non-negative integer. */
export function rankOfLabel(value: string | undefined): number | undefined {
  if (value === undefined || !/^\d{1,4}$/.test(value)) return undefined;
  const rank = Number(value);
  return rank < MAX_RANK_LABEL ? rank : undefined;
}

/**
 * Per rank, the sum (`mean` false) or mean of the first of `names` present; undefined when no
 * series of it carries the label.
 */
export function perRank(
  families: MetricFamilies,
  label: string,
  names: readonly string[],
  mean = false,
): Map<number, number> | undefined {
  for (const name of names) {
    const samples = families.get(name);
    if (samples === undefined) continue;
    const sums = new Map<number, { total: number; count: number }>();
    for (const { labels, value } of samples) {
      const rank = rankOfLabel(labels[label]);
      if (rank === undefined || !Number.isFinite(value)) continue;
      const acc = sums.get(rank) ?? { total: 0, count: 0 };
      acc.total += value;
      acc.count++;
      sums.set(rank, acc);
    }
    if (sums.size === 0) return undefined;
    const out = new Map<number, number>();
    for (const [rank, { total, count }] of sums) out.set(rank, mean ? total / count : total);
    return out;
  }
  return undefined;
}

/**
 * The ranks' readings, index = rank (ranks that reported nothing are `{}`), from per-rank maps of
 * each field; undefined unless more than one rank appears.
 */
export function rankReadings(fields: {
  readonly queued?: Map<number, number> | undefined;
  readonly running?: Map<number, number> | undefined;
  readonly kvUsage?: Map<number, number> | undefined;
  readonly capacityTokens?: Map<number, number> | undefined;
}): RankReading[] | undefined {
  let highest = -1;
  for (const map of Object.values(fields)) {
    for (const rank of map?.keys() ?? []) highest = Math.max(highest, rank);
  }
  if (highest < 1) return undefined;
  return Array.from({ length: highest + 1 }, (_, rank) => {
    const reading: { -readonly [K in keyof RankReading]: RankReading[K] } = {};
    for (const key of ["queued", "running", "kvUsage", "capacityTokens"] as const) {
      const value = fields[key]?.get(rank);
      if (value !== undefined) reading[key] = value;
    }
    return reading;
  });
}
