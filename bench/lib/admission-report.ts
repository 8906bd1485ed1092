/**
 * bench:admission's tables: per run and group what was sent, served, refused and lost with the
 * TTFT; per run and pooled group where the TTFT went (the router's queue wait, the rest); the
 * issue's targets with the samples behind each p99.
 */

import type { Outcome } from "./admission-load.js";
import { fmt, type LatencySummary, summarizeMs } from "./latency.js";
import { printTable } from "./stats.js";

export interface Run {
  name: string;
  outcomes: Outcome[];
  spanSecs: number;
}

export interface Row {
  run: string;
  group: string;
  sent: number;
  served: number;
  refused: number;
  lost: number;
  p50: number;
  p99: number;
  tokensPerSec: number;
}

export function rows(r: Run, groups: readonly string[]): Row[] {
  const out: Row[] = [];
  const fleetTokens = r.outcomes.reduce((sum, x) => sum + x.tokens, 0);
  for (const group of groups) {
    const mine = r.outcomes.filter((x) => x.group === group);
    if (mine.length === 0) continue;
    const s = summarizeMs(mine.flatMap((x) => (x.ttftMs === undefined ? [] : [x.ttftMs])));
    const refused = mine.filter(
      (x) => (x.status === 429 || x.status === 503) && x.retryAfter,
    ).length;
    const served = mine.filter((x) => x.status === 200).length;
    out.push({
      run: r.name,
      group,
      sent: mine.length,
      served,
      refused,
      lost: mine.length - served - refused,
      p50: s.p50,
      p99: s.p99,
      tokensPerSec: fleetTokens / r.spanSecs,
    });
  }
  return out;
}

export function printRows(table: readonly Row[]): void {
  printTable(
    [
      "run",
      "group",
      "sent",
      "served",
      "429/503+RA",
      "lost",
      "TTFT p50 ms",
      "TTFT p99 ms",
      "fleet tok/s",
    ],
    table.map((x) => [
      x.run,
      x.group,
      x.sent,
      x.served,
      x.refused,
      x.lost,
      fmt(x.p50),
      fmt(x.p99),
      fmt(x.tokensPerSec, 0),
    ]),
  );
}

/** A pooled group's TTFT split: the router's queue wait, and the rest (engine, network, relay). */
export interface Split {
  run: string;
  group: string;
  /** Served requests with both a TTFT and a queue wait: the samples behind every figure. */
  n: number;
  /** Served requests whose answer lacked the queue-wait header (left out of n). */
  unread: number;
  ttft: LatencySummary;
  wait: LatencySummary;
  /** TTFT − queue wait, per request. */
  rest: LatencySummary;
  /** Requests held by the router at all (wait > 0 ms). */
  held: number;
}

export function split(r: Run, label: string, groups: readonly string[]): Split | undefined {
  const served = r.outcomes.filter(
    (x) => groups.includes(x.group) && x.status === 200 && x.ttftMs !== undefined,
  );
  if (served.length === 0) return undefined;
  const read = served.filter((x) => x.routerWaitMs !== undefined);
  const ttfts = read.map((x) => x.ttftMs as number);
  const waits = read.map((x) => x.routerWaitMs as number);
  return {
    run: r.name,
    group: label,
    n: read.length,
    unread: served.length - read.length,
    ttft: summarizeMs(ttfts),
    wait: summarizeMs(waits),
    rest: summarizeMs(ttfts.map((t, i) => t - (waits[i] as number))),
    held: waits.filter((w) => w > 0).length,
  };
}

export function printSplits(splits: readonly Split[]): void {
  printTable(
    [
      "run",
      "group",
      "n",
      "held",
      "TTFT p50",
      "TTFT p99",
      "router wait p50",
      "router wait p99",
      "TTFT-wait p50",
      "TTFT-wait p99",
    ],
    splits.map((s) => [
      s.run,
      s.group,
      s.unread === 0 ? s.n : `${s.n} (+${s.unread} unread)`,
      s.held,
      fmt(s.ttft.p50),
      fmt(s.ttft.p99),
      fmt(s.wait.p50),
      fmt(s.wait.p99),
      fmt(s.rest.p50),
      fmt(s.rest.p99),
    ]),
  );
}

/** TTFT p50 and p99 of `groups` in `run` (NaN when the run was not made) and the samples behind them. */
export function ttftOf(
  runs: readonly Run[],
  run: string,
  groups: readonly string[],
): { p50: number; p99: number; n: number } {
  const r = runs.find((x) => x.name === run);
  if (r === undefined) return { p50: Number.NaN, p99: Number.NaN, n: 0 };
  const s = summarizeMs(
    r.outcomes.flatMap((x) =>
      groups.includes(x.group) && x.ttftMs !== undefined ? [x.ttftMs] : [],
    ),
  );
  return { p50: s.p50, p99: s.p99, n: s.count };
}

/** p99 TTFT of `groups` in `run` (NaN when the run was not made) and the samples behind it. */
export function p99Of(
  runs: readonly Run[],
  run: string,
  groups: readonly string[],
): { p99: number; n: number } {
  const { p99, n } = ttftOf(runs, run, groups);
  return { p99, n };
}

export function tokensPerSec(runs: readonly Run[], run: string): number {
  const r = runs.find((x) => x.name === run);
  if (r === undefined) return Number.NaN;
  return r.outcomes.reduce((s, x) => s + x.tokens, 0) / r.spanSecs;
}

/**
 * Refusals (429/503) of the runs: how many, and how many carried Retry-After; only those of
 * `groups` when given.
 */
function refusals(runs: readonly Run[], groups?: readonly string[]): [number, number] {
  let all = 0;
  let withRetryAfter = 0;
  for (const r of runs) {
    for (const x of r.outcomes) {
      if (x.status !== 429 && x.status !== 503) continue;
      if (groups !== undefined && !groups.includes(x.group)) continue;
      all += 1;
      if (x.retryAfter) withRetryAfter += 1;
    }
  }
  return [all, withRetryAfter];
}

/**
 * Each run's requests over every repeat as one run: a p99 of a few hundred samples instead of one
 * repeat's 108-144 (where it is the second slowest request, and one stall moves it).
 */
export function pooledRuns(traced: readonly { run: string; outcomes: Outcome[] }[]): Run[] {
  const byName = new Map<string, Run>();
  for (const t of traced) {
    const spanSecs = Math.max(0, ...t.outcomes.map((x) => x.endedAt)) / 1000;
    const run = byName.get(t.run);
    if (run === undefined) byName.set(t.run, { name: t.run, outcomes: [...t.outcomes], spanSecs });
    else {
      run.outcomes.push(...t.outcomes);
      run.spanSecs += spanSecs;
    }
  }
  return [...byName.values()];
}

/** One target of one run of the bench: its value, the samples behind it, and its goal. */
export interface TargetRow {
  target: string;
  /** The measured value (NaN when its runs were not made); `shown` as printed. */
  value: number;
  shown: string;
  samples: string;
  goal: string;
  /** Which way is worse, for the worst over repeats; undefined for rows not compared. */
  worse?: "higher" | "lower";
}

/** Runs of flood/on with one of its rules off, shown beside it (bench/admission.ts). */
const BESIDE = ["flood/no-hold", "flood/no-pace"] as const;

/**
 * The targets (bench:admission's issue: light tenants under a flood against their silent TTFT,
 * throughput against no admission, nothing lost, refusals with Retry-After), and the engine
 * floor's ratio beside them, each with its sample counts.
 */
export function targetRows(
  runs: readonly Run[],
  light: readonly string[],
  lost: number,
): TargetRow[] {
  const ratio = (
    target: string,
    run: string,
    base: string,
    groups: readonly string[],
    at: "p50" | "p99",
    goal: string,
  ): TargetRow => {
    const a = ttftOf(runs, run, groups);
    const b = ttftOf(runs, base, groups);
    const value = a[at] / b[at];
    const worse = goal.startsWith("<=") ? "higher" : undefined;
    return { target, value, shown: fmt(value, 2), samples: `${a.n} / ${b.n}`, goal, worse };
  };
  const throughput = (target: string, run: string, goal = ">= 0.97"): TargetRow => {
    const value = tokensPerSec(runs, run) / tokensPerSec(runs, "flood/off");
    return { target, value, shown: fmt(value, 3), samples: "", goal, worse: "lower" };
  };
  const [refused, withRetryAfter] = refusals(runs);
  const [lightRefused] = refusals(runs, [...light, "high"]);
  const noReserve50 = ratio("", "flood/no-reserve", "silent", light, "p50", "");
  const noReserve99 = ratio("", "flood/no-reserve", "silent", light, "p99", "");
  return [
    ratio("B-D p50 TTFT, flood/off ÷ silent", "flood/off", "silent", light, "p50", "-"),
    ratio("B-D p99 TTFT, flood/off ÷ silent", "flood/off", "silent", light, "p99", "-"),
    ratio("B-D p50 TTFT, flood/on ÷ silent", "flood/on", "silent", light, "p50", "<= 3"),
    ratio("B-D p99 TTFT, flood/on ÷ silent", "flood/on", "silent", light, "p99", "<= 8"),
    ratio("B-D p99 TTFT, flood/prio ÷ silent", "flood/prio", "silent", light, "p99", "<= 4"),
    {
      target: "B-D p50 / p99 TTFT, flood/no-reserve ÷ silent",
      value: Number.NaN,
      shown: `${noReserve50.shown} / ${noReserve99.shown}`,
      samples: noReserve99.samples,
      goal: "(reference)",
    },
    // The release rule's hold and the reserve's pace, each off beside on (flood/on): compared
    // over repeats, no goal of their own.
    ...BESIDE.flatMap((run) =>
      (["p50", "p99"] as const).map((q) =>
        compared(ratio(`B-D ${q} TTFT, ${run} ÷ silent`, run, "silent", light, q, "")),
      ),
    ),
    ratio(
      "high p99 TTFT, prio-flood/on ÷ prio-silent",
      "prio-flood/on",
      "prio-silent",
      ["high"],
      "p99",
      "<= 4",
    ),
    ratio(
      "B-D p99 TTFT, floor/on ÷ silent (the engine's floor)",
      "floor/on",
      "silent",
      light,
      "p99",
      "(reference)",
    ),
    throughput("fleet tok/s, flood/on ÷ flood/off", "flood/on"),
    throughput("fleet tok/s, flood/prio ÷ flood/off", "flood/prio"),
    // What the kept slot costs, beside flood/on: the same flood without it.
    throughput("fleet tok/s, flood/no-reserve ÷ flood/off", "flood/no-reserve", "(reference)"),
    ...BESIDE.map((run) => throughput(`fleet tok/s, ${run} ÷ flood/off`, run, "(beside flood/on)")),
    {
      target: "requests lost (neither served nor 429/503 + Retry-After)",
      value: lost,
      shown: String(lost),
      samples: "",
      goal: "0",
      worse: "higher",
    },
    {
      target: "refusals (429/503), with Retry-After",
      value: Number.NaN,
      shown: `${refused}, ${withRetryAfter}`,
      samples: "",
      goal: "all",
    },
    {
      target: "refusals of the light and high-priority requests",
      value: lightRefused,
      shown: String(lightRefused),
      samples: "",
      goal: "0",
      worse: "higher",
    },
  ];
}

/** A row shown beside a target's over repeats (worst = highest), without a goal of its own. */
function compared(row: TargetRow): TargetRow {
  return { ...row, goal: "(beside flood/on)", worse: "higher" };
}

/** The targets as printed rows (target, measured, samples, goal). */
export function targets(runs: readonly Run[], light: readonly string[], lost: number): string[][] {
  return targetRows(runs, light, lost).map((r) => [r.target, r.shown, r.samples, r.goal]);
}

/**
 * The targets over repeats of the same runs: each repeat's value, their median and the worst
 * (the highest where lower is the goal, the lowest where higher is). Rows without a value in
 * any repeat (runs not made) are left out.
 */
export function repeatedTargets(
  repeats: readonly TargetRow[][],
  /** The same targets over every repeat's samples pooled (targetRows of the pooled runs). */
  pooled?: readonly TargetRow[],
): string[][] {
  const first = repeats[0] ?? [];
  return first.flatMap((row, i) => {
    if (row.worse === undefined) return [];
    const values = repeats.map((rows) => rows[i]?.value ?? Number.NaN);
    const finite = values.filter((v) => Number.isFinite(v));
    if (finite.length === 0) return [];
    const sorted = [...finite].sort((a, b) => a - b);
    const mid = sorted.length / 2;
    const median =
      sorted.length % 2 === 1
        ? (sorted[Math.floor(mid)] as number)
        : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
    const worst = row.worse === "higher" ? (sorted.at(-1) as number) : (sorted[0] as number);
    // As the single run prints it.
    const decimals = row.shown.split(".")[1]?.length ?? 0;
    const all = pooled?.[i];
    return [
      [
        row.target,
        values.map((v) => fmt(v, decimals)).join(" "),
        fmt(median, decimals),
        fmt(worst, decimals),
        ...(pooled === undefined ? [] : [all?.shown ?? "-", all?.samples ?? ""]),
        row.goal,
      ],
    ];
  });
}
