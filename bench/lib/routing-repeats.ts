/**
 * bench:routing --repeats: one row's repeats (the same requests, a different timing seed each)
 * folded into one RowResult, with the mean, minimum, maximum and spread of the figures that move
 * from run to run (issue 27: one run per row hid a spread of several points of hit rate).
 */
import { mulberry32 } from "../../sim/prng.js";
import { summarizeMs } from "./latency.js";
import { combineAccounts } from "./routing-account.js";
import type { RowResult, SharingLags } from "./routing-runner.js";

/** A figure over the repeats: spread = max − min. */
export interface Range {
  mean: number;
  min: number;
  max: number;
  spread: number;
}

export function rangeOf(values: readonly number[]): Range {
  const finite = values.filter((v) => Number.isFinite(v));
  if (finite.length === 0) return { mean: Number.NaN, min: Number.NaN, max: Number.NaN, spread: 0 };
  const min = Math.min(...finite);
  const max = Math.max(...finite);
  return { mean: finite.reduce((s, v) => s + v, 0) / finite.length, min, max, spread: max - min };
}

/**
 * The sample standard deviation of the finite values (NaN under two). A spread over 5 repeats is
 * a range of 5 samples, about 2.3 of these on average and 3.5 at its 90th percentile, so a cell
 * meets a spread of 1.5 points in 9 runs of 10 only with a per-run deviation under about 0.43.
 */
export function sampleSd(values: readonly number[]): number {
  const finite = values.filter((v) => Number.isFinite(v));
  if (finite.length < 2) return Number.NaN;
  const mean = finite.reduce((s, v) => s + v, 0) / finite.length;
  return Math.sqrt(finite.reduce((s, v) => s + (v - mean) ** 2, 0) / (finite.length - 1));
}

/**
 * The largest per-run deviation (a share: 0.0043 = 0.43 points) at which a spread over 5 repeats
 * stays within the 1.5-point goal in 9 runs of 10 (sampleSd above).
 */
export const SD_FOR_SPREAD_GOAL = 0.0043;

/** One repeat of one row, as it ran. */
export interface RepeatFigures {
  /** What set this repeat's timing (the router's engine-poll phase). */
  timingSeed: number;
  /** Where the router's first periodic engine poll fell after the row's routers started, ms. */
  pollPhaseMs: number;
  /** os.loadavg()[0] when the repeat's row started (the machine is shared). */
  loadAverage: number;
  hitRate: number;
  ttftMeanMs: number;
  warmTtftMeanMs: number;
  e2eMeanMs: number;
  requestsPerSec: number;
  errors: number;
  perWorker: Record<string, number>;
}

export interface RowSpread {
  hitRate: Range;
  ttftMeanMs: Range;
}

/** One repeat's result with the samples the pooled summaries need. */
export interface RowRun {
  result: RowResult;
  repeat: RepeatFigures;
  ttftMs: number[];
  warmTtftMs: number[];
  e2eMs: number[];
}

/**
 * The engine-poll phase of a timing seed: the first periodic poll after the routers start falls
 * this far into the interval (the read when a worker is added happens at once, as always).
 */
export function pollPhaseMs(timingSeed: number, intervalMs: number): number {
  return intervalMs <= 0 ? 0 : Math.floor(mulberry32(timingSeed)() * intervalMs);
}

/**
 * The repeats of one row as one RowResult: hit rate and rates are means over the repeats, latency
 * summaries pool every repeat's requests, counts add up, requests per worker are per repeat
 * (rounded means); `repeats` and `spread` keep what moved.
 */
export function combineRepeats(runs: readonly RowRun[]): RowResult {
  const first = runs[0];
  if (first === undefined) throw new RangeError("combineRepeats needs at least one run");
  if (runs.length === 1) {
    const r = first.repeat;
    return {
      ...first.result,
      repeats: [r],
      spread: { hitRate: rangeOf([r.hitRate]), ttftMeanMs: rangeOf([r.ttftMeanMs]) },
    };
  }
  const results = runs.map((r) => r.result);
  const mean = (pick: (r: RowResult) => number) =>
    results.reduce((s, r) => s + pick(r), 0) / results.length;
  const perWorker: Record<string, number> = {};
  for (const id of Object.keys(first.result.perWorker)) {
    perWorker[id] = Math.round(mean((r) => r.perWorker[id] ?? 0));
  }
  const branches: Record<string, number> = {};
  for (const r of results) {
    for (const [b, v] of Object.entries(r.branches)) branches[b] = (branches[b] ?? 0) + v;
  }
  const splits = results.flatMap((r) => (r.split === undefined ? [] : [r.split]));
  const repeats = runs.map((r) => r.repeat);
  const combined: RowResult = {
    row: first.result.row,
    requests: first.result.requests,
    errors: results.reduce((s, r) => s + r.errors, 0),
    firstError: results.find((r) => r.firstError !== undefined)?.firstError,
    hitRate: mean((r) => r.hitRate),
    promptTokens: results.reduce((s, r) => s + r.promptTokens, 0),
    cachedTokens: results.reduce((s, r) => s + r.cachedTokens, 0),
    ttftMs: summarizeMs(runs.flatMap((r) => r.ttftMs)),
    warmTtftMs: summarizeMs(runs.flatMap((r) => r.warmTtftMs)),
    e2eMs: summarizeMs(runs.flatMap((r) => r.e2eMs)),
    wallMs: results.reduce((s, r) => s + r.wallMs, 0),
    requestsPerSec: mean((r) => r.requestsPerSec),
    outputTokensPerSec: mean((r) => r.outputTokensPerSec),
    perWorker,
    loopUtilization: mean((r) => r.loopUtilization),
    branches,
    repeats,
    spread: {
      hitRate: rangeOf(repeats.map((r) => r.hitRate)),
      ttftMeanMs: rangeOf(repeats.map((r) => r.ttftMeanMs)),
    },
  };
  if (splits.length > 0) {
    combined.split = {
      routedHitRate: splits.reduce((s, x) => s + x.routedHitRate, 0) / splits.length,
      bypassHitRate: splits.reduce((s, x) => s + x.bypassHitRate, 0) / splits.length,
    };
  }
  const diagnosis = results.find((r) => r.diagnosis !== undefined)?.diagnosis;
  if (diagnosis !== undefined) combined.diagnosis = diagnosis;
  const media = results.flatMap((r) => (r.mediaFalseHits === undefined ? [] : [r.mediaFalseHits]));
  if (media.length > 0) {
    combined.mediaFalseHits = {
      imageDecisions: media.reduce((s, m) => s + m.imageDecisions, 0),
      claimed: media.reduce((s, m) => s + m.claimed, 0),
      falseHits: media.reduce((s, m) => s + m.falseHits, 0),
    };
  }
  const account = combineAccounts(results.map((r) => r.account));
  if (account !== undefined) combined.account = account;
  const sharing = results.flatMap((r) => (r.sharing === undefined ? [] : [r.sharing]));
  if (sharing.length > 0) {
    const sum = (pick: (x: SharingLags) => number) => sharing.reduce((s, x) => s + pick(x), 0);
    combined.sharing = {
      claimSeconds: sum((x) => x.claimSeconds),
      claims: sum((x) => x.claims),
      opDelaySeconds: sum((x) => x.opDelaySeconds),
      ops: sum((x) => x.ops),
      claimBuckets: addCounts(sharing.map((x) => x.claimBuckets)),
      opBuckets: addCounts(sharing.map((x) => x.opBuckets)),
      relayed: sum((x) => x.relayed),
      relayFallbacks: sum((x) => x.relayFallbacks),
    };
  }
  return combined;
}

/** Counts by key, added up. */
function addCounts(all: readonly Readonly<Record<string, number>>[]): Record<string, number> {
  const sum: Record<string, number> = {};
  for (const counts of all) for (const [k, n] of Object.entries(counts)) sum[k] = (sum[k] ?? 0) + n;
  return sum;
}
