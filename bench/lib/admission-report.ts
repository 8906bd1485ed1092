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
 * The targets (bench:admission's issue: light tenants under a flood against their silent TTFT,
 * throughput against no admission, nothing lost, refusals with Retry-After), and the engine
 * floor's ratio beside them, each with its sample counts.
 */
export function targets(runs: readonly Run[], light: readonly string[], lost: number): string[][] {
  const ratio = (run: string, base: string, groups: readonly string[], at: "p50" | "p99") => {
    const a = ttftOf(runs, run, groups);
    const b = ttftOf(runs, base, groups);
    return [fmt(a[at] / b[at], 2), `${a.n} / ${b.n}`];
  };
  const throughput = (run: string) =>
    fmt(tokensPerSec(runs, run) / tokensPerSec(runs, "flood/off"), 3);
  const [refused, withRetryAfter] = refusals(runs);
  const [lightRefused] = refusals(runs, [...light, "high"]);
  return [
    ["B-D p50 TTFT, flood/off ÷ silent", ...ratio("flood/off", "silent", light, "p50"), "-"],
    ["B-D p99 TTFT, flood/off ÷ silent", ...ratio("flood/off", "silent", light, "p99"), "-"],
    ["B-D p50 TTFT, flood/on ÷ silent", ...ratio("flood/on", "silent", light, "p50"), "<= 3"],
    ["B-D p99 TTFT, flood/on ÷ silent", ...ratio("flood/on", "silent", light, "p99"), "<= 8"],
    ["B-D p99 TTFT, flood/prio ÷ silent", ...ratio("flood/prio", "silent", light, "p99"), "<= 4"],
    [
      "B-D p50 / p99 TTFT, flood/no-reserve ÷ silent",
      `${ratio("flood/no-reserve", "silent", light, "p50")[0]} / ${ratio("flood/no-reserve", "silent", light, "p99")[0]}`,
      ratio("flood/no-reserve", "silent", light, "p99")[1] as string,
      "(reference)",
    ],
    [
      "high p99 TTFT, prio-flood/on ÷ prio-silent",
      ...ratio("prio-flood/on", "prio-silent", ["high"], "p99"),
      "<= 4",
    ],
    [
      "B-D p99 TTFT, floor/on ÷ silent (the engine's floor)",
      ...ratio("floor/on", "silent", light, "p99"),
      "(reference)",
    ],
    ["fleet tok/s, flood/on ÷ flood/off", throughput("flood/on"), "", ">= 0.97"],
    ["fleet tok/s, flood/prio ÷ flood/off", throughput("flood/prio"), "", ">= 0.97"],
    ["requests lost (neither served nor 429/503 + Retry-After)", String(lost), "", "0"],
    ["refusals (429/503), with Retry-After", `${refused}, ${withRetryAfter}`, "", "all"],
    ["refusals of the light and high-priority requests", String(lightRefused), "", "0"],
  ];
}
