/**
 * bench:routing --matrix: the tenants family (routing-workloads.ts) over a grid of cells, each cell
 * the base shape with one or two axes moved (tenants, Zipf skew, preamble, prompt spread, turns,
 * clients, KV share), every cell run with the same rows and repeats, and one summary line per cell:
 * the default's mean, worst repeat and spread of hit rate against the oracle's, mean TTFT against
 * the oracle's, and the index loss of the router's cache account.
 */
import os from "node:os";
import { CHARS_PER_TOKEN } from "../../sim/tokenizer.js";
import type { AccountTotals } from "../../src/cache-account/account-totals.js";
import {
  createPolicy,
  isPolicyName,
  type PolicyOptions,
} from "../../src/scheduling/builtin-profiles.js";
import { SUGGESTED_CHURN_HALF_LIFE } from "../../src/scheduling/options.js";
import type { Policy } from "../../src/scheduling/policy.js";
import { SUGGESTED_RANK_HOLD_MS } from "../../src/state/settings.js";
import { fmt } from "./latency.js";
import { pollPhaseMs, rangeOf, SD_FOR_SPREAD_GOAL, sampleSd } from "./routing-repeats.js";
import { ORACLE_ROW, type RowResult, type WorkloadReport } from "./routing-runner.js";
import { parseRowLabel, type RowKnob, relaysToLeader } from "./routing-variants.js";
import {
  type PreparedWorkload,
  prepareWorkload,
  type RoutingPreset,
  type TenantsShape,
} from "./routing-workloads.js";
import { printTable } from "./stats.js";
import {
  type BuiltLeaderSwitches,
  type ReplayResult,
  type ReplicaAttribution,
  type ReplicaDecider,
  replay,
} from "./ttft-replay.js";

export interface MatrixCell {
  name: string;
  shape?: Partial<TenantsShape>;
}

/**
 * One axis at a time around the base (16 tenants, Zipf 1, 8 clients, the fleet's KV 0.3 of the
 * working set), plus one cell that moves several at once: every value the issue names is covered,
 * in 10 cells. A small KV share adds conversations (routing-workloads.ts FEASIBLE_REQUESTS).
 */
export const MATRIX_CELLS: readonly MatrixCell[] = [
  { name: "base" },
  { name: "tenants-8", shape: { tenants: 8 } },
  { name: "tenants-64", shape: { tenants: 64 } },
  { name: "zipf-0.6", shape: { zipfExponent: 0.6 } },
  { name: "zipf-1.2", shape: { zipfExponent: 1.2 } },
  { name: "clients-4", shape: { clients: 4 } },
  { name: "clients-32", shape: { clients: 32, conversations: 128 } },
  { name: "kv-0.15", shape: { fleetKvShare: 0.15 } },
  { name: "kv-0.6", shape: { fleetKvShare: 0.6 } },
  {
    name: "long-preamble",
    shape: { toolPreambleTokens: 2048, tenantPromptMinTokens: 256, turns: 6 },
  },
];

/**
 * --quick: three cells that still move tenants, clients and KV share (the quick base's fleet holds
 * 0.6 of the working set; at 0.15 its small requests' working set would need 5× the chats).
 */
export const QUICK_MATRIX_CELLS: readonly MatrixCell[] = [
  { name: "base" },
  { name: "tenants-64-kv-0.3", shape: { tenants: 64, fleetKvShare: 0.3 } },
  { name: "clients-32", shape: { clients: 32, conversations: 64 } },
];

/** The preset a cell runs on: the base preset with the cell's changes. */
export function cellPreset(base: RoutingPreset, cell: MatrixCell): RoutingPreset {
  const p = structuredClone(base);
  Object.assign(p.tenants, cell.shape ?? {});
  return p;
}

export interface CellSummary {
  cell: string;
  row: string;
  hitMean: number;
  hitMin: number;
  /** max − min over the repeats, as a share (0.015 = 1.5 points). */
  hitSpread: number;
  /** The repeats' sample standard deviation, as a share; with --replay only (NaN otherwise). */
  hitSd?: number;
  oracleHitMean: number;
  /** The oracle's own spread over the repeats (with --replay, each repeat is its own workload). */
  oracleSpread: number;
  /**
   * Worst repeat / the oracle's mean hit rate; with --replay, where each repeat is a different
   * workload seed, the worst of each seed's hit rate over the oracle's on the same seed.
   */
  worstRatio: number;
  ttftMeanMs: number;
  oracleTtftMeanMs: number;
  /** Index loss as a share of the accounted prompt tokens (NaN without an account). */
  indexLoss: number;
  routingLoss: number;
  /** Failed requests over every repeat (an engine's 400 for a request larger than its cache). */
  errors: number;
  loadAverage: { min: number; max: number };
}

function lossShares(a: AccountTotals | undefined): { index: number; routing: number } {
  if (a === undefined || a.prompt === 0) return { index: Number.NaN, routing: Number.NaN };
  const r = a.routingLoss;
  return {
    index: a.indexLoss / a.prompt,
    routing: (r.load + r.session + r.filter + r.unknown) / a.prompt,
  };
}

/** One summary per router row of a cell's report, against the cell's oracle. */
export function summarizeCell(cell: string, report: WorkloadReport): CellSummary[] {
  const oracle = report.rows.find((r) => r.row === ORACLE_ROW);
  const loads = report.rows.flatMap((r) => (r.repeats ?? []).map((x) => x.loadAverage));
  const loadAverage = { min: Math.min(...loads), max: Math.max(...loads) };
  return report.rows
    .filter((r) => r.row !== ORACLE_ROW)
    .map((r: RowResult) => {
      const oracleHit = oracle?.spread?.hitRate.mean ?? oracle?.hitRate ?? Number.NaN;
      const min = r.spread?.hitRate.min ?? r.hitRate;
      const loss = lossShares(r.account);
      return {
        cell,
        row: r.row,
        hitMean: r.hitRate,
        hitMin: min,
        hitSpread: r.spread?.hitRate.spread ?? 0,
        oracleHitMean: oracleHit,
        oracleSpread: oracle?.spread?.hitRate.spread ?? 0,
        worstRatio: min / oracleHit,
        ttftMeanMs: r.ttftMs.mean,
        oracleTtftMeanMs: oracle?.ttftMs.mean ?? Number.NaN,
        indexLoss: loss.index,
        routingLoss: loss.routing,
        errors: r.repeats?.reduce((sum, x) => sum + x.errors, 0) ?? r.errors,
        loadAverage,
      };
    });
}

const pct = (x: number) => (Number.isFinite(x) ? `${(x * 100).toFixed(1)}%` : "-");

/** The matrix as one table: a line per cell and router row. */
export function printMatrix(summaries: readonly CellSummary[]): void {
  printTable(
    [
      "cell",
      "policy",
      "hit mean",
      "worst",
      "spread",
      "oracle",
      "oracle spread",
      "worst/oracle",
      "TTFT",
      "oracle TTFT",
      "TTFT ratio",
      "index loss",
      "routing loss",
      "errors",
      "load avg",
    ],
    summaries.map((s) => [
      s.cell,
      s.row,
      pct(s.hitMean),
      pct(s.hitMin),
      (s.hitSpread * 100).toFixed(1),
      pct(s.oracleHitMean),
      (s.oracleSpread * 100).toFixed(1),
      fmt(s.worstRatio, 3),
      fmt(s.ttftMeanMs),
      fmt(s.oracleTtftMeanMs),
      fmt(s.ttftMeanMs / s.oracleTtftMeanMs, 2),
      pct(s.indexLoss),
      pct(s.routingLoss),
      String(s.errors),
      `${fmt(s.loadAverage.min, 1)}-${fmt(s.loadAverage.max, 1)}`,
    ]),
  );
}

/** The issue's goals for one row over every cell, as report lines (never hidden when missed). */
export function matrixGoalLines(summaries: readonly CellSummary[], row: string): string[] {
  const mine = summaries.filter((s) => s.row === row);
  if (mine.length === 0) return [];
  const failing = (ok: (s: CellSummary) => boolean) =>
    mine.filter((s) => !ok(s)).map((s) => s.cell);
  const line = (goal: string, bad: string[]) =>
    `goal: ${row} ${goal} in every cell → ${bad.length === 0 ? "met" : `MISSED in ${bad.join(", ")}`}`;
  return [
    line(
      "worst repeat ≥ 0.97× the oracle's hit rate",
      failing((s) => s.worstRatio >= 0.97),
    ),
    line(
      "hit-rate spread ≤ 1.5 points",
      failing((s) => s.hitSpread <= 0.015 + 1e-9),
    ),
    line(
      "mean TTFT ≤ the oracle's",
      failing((s) => s.ttftMeanMs <= s.oracleTtftMeanMs),
    ),
    line(
      "index loss ≤ 2% of prompt tokens",
      failing((s) => !(s.indexLoss > 0.02)),
    ),
  ];
}

/**
 * With --seeds: each router row's deviation over every cell and workload seed, in one line, the
 * figures a rule is compared by (docs/benchmarks.md, "The spread as a deviation"): the mean and
 * largest per-cell sd, how many cells are over SD_FOR_SPREAD_GOAL, the mean hit rate, the lowest
 * worst ÷ oracle and the highest mean TTFT ÷ oracle.
 */
export function deviationLines(summaries: readonly CellSummary[]): string[] {
  const rows = [...new Set(summaries.map((s) => s.row))];
  return rows.map((row) => {
    const of = summaries.filter((s) => s.row === row);
    const sds = of.map((s) => (s.hitSd ?? Number.NaN) * 100);
    const mean = (xs: readonly number[]) => xs.reduce((a, x) => a + x, 0) / xs.length;
    const over = sds.filter((sd) => !(sd <= SD_FOR_SPREAD_GOAL * 100)).length;
    return [
      `${row}: sd mean ${mean(sds).toFixed(2)}, largest ${Math.max(...sds).toFixed(2)}`,
      `over ${(SD_FOR_SPREAD_GOAL * 100).toFixed(2)} in ${over} of ${of.length}`,
      `hit mean ${mean(of.map((s) => s.hitMean * 100)).toFixed(2)}%`,
      `worst ÷ oracle ≥ ${Math.min(...of.map((s) => s.worstRatio)).toFixed(3)}`,
      `TTFT ÷ oracle ≤ ${Math.max(...of.map((s) => s.ttftMeanMs / s.oracleTtftMeanMs)).toFixed(2)}`,
    ].join(", ");
  });
}

/**
 * --replay: a cell in model time (ttft-replay.ts: the simulator's engines on a virtual clock, the
 * router's scheduler, index and policy, no HTTP, no CPU noise), each repeat on its own workload
 * seed and engine-poll phase, so that shape and timing vary while every figure is reproducible.
 * TTFT is in model ms. Index loss is estimated per request: what the index said the chosen worker
 * held beyond what its engine had, less a block of rounding.
 */
/** The router's --state-load-interval-ms and --state-claim-ttl-ms defaults (real ms). */
const STATE_LOAD_INTERVAL_MS = 50;
/** The interval before 2026-11-30 (row knob `slow-load`). */
const SLOW_LOAD_INTERVAL_MS = 250;
const STATE_CLAIM_TTL_MS = 2000;

export async function replayCell(
  cell: string,
  preset: RoutingPreset,
  rows: readonly string[],
  repeats: number,
  firstSeed: number,
  /** > 0: every repeat on the same workload seed, its engine steps jittered by this share. */
  jitter = 0,
  /**
   * Router rows as this many replicas sharing state, their ops and claims `delayMs` real ms on
   * the way (ttft-replay.ts ReplicaModel); the oracle stays one.
   */
  replicas?: { count: number; delayMs: number },
): Promise<CellSummary[]> {
  const perRow = new Map<
    string,
    { hits: number[]; ttfts: number[]; lost: number; prompt: number; errors: number }
  >();
  const attributions = new Map<string, ReplicaAttribution>();
  for (let i = 0; i < repeats; i++) {
    const p = { ...preset, seed: jitter > 0 ? preset.seed : preset.seed + i };
    const w = prepareWorkload("tenants", p);
    const base = replayTiming(p, w, firstSeed + i, jitter);
    for (const label of rows) {
      const { base: name, knobs } = parseRowLabel(label);
      if (relaysToLeader(knobs))
        throw new Error(
          `row knobs "relay", "relay-all" and "relay-decisions" run real replicas: drop --replay (the model of "relay" is leader-new)`,
        );
      let result: ReplayResult;
      if (name === ORACLE_ROW) {
        result = await replay(w, { ...base, chooser: { kind: "pinned", workerOf: w.oracle! } });
      } else {
        const policy = replayPolicy(label);
        // Model ms are real ms ÷ timeScale: the router's real-time settings, scaled.
        const scale = p.timeScale > 0 ? p.timeScale : 1;
        const model =
          replicas === undefined || replicas.count < 2
            ? {}
            : {
                replicas: {
                  count: replicas.count,
                  delayMs: replicas.delayMs / scale,
                  loadIntervalMs:
                    (knobs.includes("slow-load") ? SLOW_LOAD_INTERVAL_MS : STATE_LOAD_INTERVAL_MS) /
                    scale,
                  claimTtlMs: STATE_CLAIM_TTL_MS / scale,
                  rankHoldMs: knobs.includes("rank-hold") ? SUGGESTED_RANK_HOLD_MS / scale : 0,
                  seed: firstSeed + i,
                  policyOf: () => replayPolicy(label),
                  ...deciderKnob(knobs),
                },
              };
        const attribution = attributions.get(label) ?? {
          decisions: 0,
          agree: 0,
          differ: new Map(),
        };
        attributions.set(label, attribution);
        result = await replay(w, {
          ...base,
          ...model,
          chooser: { kind: "policy", policy },
          ...("replicas" in model ? { attribution } : {}),
        });
      }
      const r = perRow.get(label) ?? { hits: [], ttfts: [], lost: 0, prompt: 0, errors: 0 };
      r.errors += result.rejected.length;
      r.hits.push(result.hitRate);
      r.ttfts.push(result.requests.reduce((s, x) => s + x.ttft, 0) / result.requests.length);
      for (const x of result.requests) {
        r.prompt += x.promptTokens;
        const claimed = x.matchedChars / CHARS_PER_TOKEN;
        r.lost += Math.max(0, claimed - x.cachedTokens - BLOCK_TOKENS);
      }
      perRow.set(label, r);
    }
  }
  for (const [label, a] of attributions) {
    if (a.decisions > 0) console.log(attributionLine(cell, label, a));
  }
  const oracle = perRow.get(ORACLE_ROW);
  const mean = (xs: readonly number[]) => xs.reduce((s, x) => s + x, 0) / xs.length;
  const loadAverage = { min: os.loadavg()[0] ?? 0, max: os.loadavg()[0] ?? 0 };
  return [...perRow]
    .filter(([label]) => label !== ORACLE_ROW)
    .map(([label, r]) => {
      const hits = rangeOf(r.hits);
      const oracleHit = oracle === undefined ? Number.NaN : mean(oracle.hits);
      // Seed by seed: the workloads differ, and so does what the oracle gets on each.
      const worstRatio =
        oracle === undefined
          ? Number.NaN
          : Math.min(...r.hits.map((h, i) => h / (oracle.hits[i] ?? Number.NaN)));
      return {
        cell,
        row: label,
        hitMean: hits.mean,
        hitMin: hits.min,
        hitSpread: hits.spread,
        hitSd: sampleSd(r.hits),
        oracleHitMean: oracleHit,
        oracleSpread: oracle === undefined ? Number.NaN : rangeOf(oracle.hits).spread,
        worstRatio,
        ttftMeanMs: mean(r.ttfts),
        oracleTtftMeanMs: oracle === undefined ? Number.NaN : mean(oracle.ttfts),
        indexLoss: r.prompt === 0 ? Number.NaN : r.lost / r.prompt,
        routingLoss: Number.NaN,
        errors: r.errors,
        loadAverage,
      };
    });
}

/** leader-built's switches, by the row knob that sets each. */
const BUILT_LEADER_SWITCHES: readonly (readonly [RowKnob, keyof BuiltLeaderSwitches])[] = [
  ["own-tree", "ownTree"],
  ["leader-records", "leaderRecords"],
  ["ask-each", "askEach"],
  ["leader-counts", "leaderCounts"],
];

/** The replay's ReplicaDecider a row's knobs name, as an option to spread. */
function deciderKnob(knobs: readonly RowKnob[]): {
  decider?: ReplicaDecider;
  built?: BuiltLeaderSwitches;
} {
  const switches = BUILT_LEADER_SWITCHES.filter(([knob]) => knobs.includes(knob));
  if (knobs.includes("leader-built")) {
    return {
      decider: "leader-built",
      built: Object.fromEntries(switches.map(([, k]) => [k, true])),
    };
  }
  if (switches.length > 0)
    throw new Error(`row knob "${switches[0]![0]}" switches a way of leader-built: add it`);
  if (knobs.includes("leader")) return { decider: "leader" };
  if (knobs.includes("leader-new")) return { decider: "leader-new" };
  if (knobs.includes("tenant-owner")) return { decider: "tenant" };
  if (knobs.includes("text-owner")) return { decider: "text" };
  return {};
}

/**
 * One line of where replicas' decisions part from one router's on the same state (ttft-replay.ts
 * ReplicaAttribution): each kind/cause with its count and the held characters it gave up.
 */
export function attributionLine(cell: string, row: string, a: ReplicaAttribution): string {
  const parts = [...a.differ]
    .sort((x, y) => y[1].lostChars - x[1].lostChars)
    .map(([key, e]) => `${key} ${e.count} (${Math.round(e.lostChars / 1000)}k chars)`);
  const differ = a.decisions - a.agree;
  return `${cell} ${row}: ${differ} of ${a.decisions} decisions differ from one router's on the same state: ${parts.join(", ")}`;
}

/**
 * A replay's fleet and timing for timing seed `seed`: the engine polls' phase, and with `jitter`
 * > 0 each engine step 1 ± jitter of its model time.
 */
export function replayTiming(
  p: RoutingPreset,
  w: PreparedWorkload,
  seed: number,
  jitter: number,
): Omit<Parameters<typeof replay>[1], "chooser"> {
  const enginePollMs = p.timeScale > 0 ? 5000 / p.timeScale : 0;
  return {
    workers: p.workers,
    concurrency: w.concurrency ?? p.concurrency,
    enginePollMs,
    enginePollPhaseMs: pollPhaseMs(seed, enginePollMs),
    ...(jitter > 0 ? { jitter: { seed, share: jitter } } : {}),
  };
}

/** A fresh policy for a router row's label (`prefix_cost`, `prefix_cost:churn`...). */
export function replayPolicy(label: string): Policy {
  const { base: name, knobs } = parseRowLabel(label);
  if (!isPolicyName(name)) throw new Error(`--replay: unknown policy ${name}`);
  return createPolicy(name, replayPolicyOptions(knobs));
}

/** Tokens of one simulator block: an engine caches whole blocks only. */
const BLOCK_TOKENS = 16;

function replayPolicyOptions(knobs: readonly RowKnob[]): PolicyOptions {
  return {
    ...(knobs.includes("no-inflight") ? { prefixCostRequestChars: 0 } : {}),
    ...(knobs.includes("no-queue") ? { prefixCostQueueWeight: 0 } : {}),
    ...(knobs.includes("no-eviction") ? { prefixCostEvictionWeight: 0 } : {}),
    ...(knobs.includes("rotation") ? { prefixCostTieBreak: "rotation" as const } : {}),
    ...(knobs.includes("churn") ? { prefixCostChurnHalfLife: SUGGESTED_CHURN_HALF_LIFE } : {}),
  };
}
