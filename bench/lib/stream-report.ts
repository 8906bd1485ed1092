/**
 * bench:stream's figures: each run against the direct run of its round ("added" latency), the
 * medians over rounds per row, and the medians of the per-round ratios against nginx.
 */
import { fmt } from "./latency.js";
import { median, printTable } from "./stats.js";
import type { StreamLoadResult } from "./stream-load.js";

/**
 * bare: a bare Node.js proxy (the runtime's floor); base: the router built from --base REF;
 * router-nginx: the router with --data-plane nginx (nginx relays, the router decides; the CPU of
 * both processes counted); nginx-floor: the same nginx configuration in front of a Node.js process
 * that answers every decision with a fixed redirect (bench/lib/nginx-floor.ts), the least any
 * per-request decision call to Node.js costs.
 */
export const ROWS = [
  "direct",
  "nginx",
  "bare",
  "base",
  "router",
  "router-nginx",
  "nginx-floor",
  "cluster",
] as const;
export type RowName = (typeof ROWS)[number];

export interface RowRun {
  row: RowName;
  round: number;
  streams: number;
  result: StreamLoadResult;
}

export interface RowSummary {
  streams: number;
  row: RowName;
  rounds: number;
  chunksPerSec: number;
  /** Chunks/s over the paced ideal (C × K per stream lifetime). */
  ofIdeal: number;
  headersP50Ms: number;
  headersP99Ms: number;
  firstChunkP50Ms: number;
  firstChunkP99Ms: number;
  /** Over the direct run of the same round (0 for direct itself). */
  addedFirstChunkP50Ms: number;
  addedFirstChunkP99Ms: number;
  gapP50Ms: number;
  gapP99Ms: number;
  addedGapP50Ms: number;
  addedGapP99Ms: number;
  cpuMicrosPerChunk: number;
  /** Of cpuMicrosPerChunk, the router's own process (router-nginx: the rest is nginx's). */
  cpuFirstMicrosPerChunk: number;
  rssPeakMB: number;
  /** (peak − idle) / C, KB. */
  rssPerStreamKB: number;
  /** Medians of the per-round ratios to nginx (NaN without nginx). */
  cpuVsNginx: number;
  addedFirstChunkVsNginx: number;
  /**
   * The added first chunk against the data-plane target, 1.5 × nginx's added (0 when below) + 1 ms:
   * the median over rounds of (this row's added − that limit), ms; <= 0 meets it. Steadier than the ratio,
   * whose denominator (nginx's added p50, a millisecond or two) moves it a lot.
   */
  firstChunkOverTargetMs: number;
  chunksPerSecVsNginx: number;
  errors: number;
  incomplete: number;
  misordered: number;
  /** Direct only: rounds in which the machine itself fell behind the pacing. */
  behindRounds: number;
}

export function cpuPerChunk(r: StreamLoadResult): number {
  return r.cpuMicros === undefined || r.chunks === 0 ? Number.NaN : r.cpuMicros / r.chunks;
}

/** Chunks/s the pacing gives when nothing is slow: C streams of K chunks each lifetime. */
export function idealChunksPerSec(streams: number, chunks: number, lifetimeMs: number): number {
  return (streams * chunks * 1000) / lifetimeMs;
}

/**
 * A direct run the machine could not keep up with: under 90% of the ideal chunks/s, or its median
 * gap half an interval late. The proxies' rows of that round are then bounded by the machine.
 */
export function directBehind(r: StreamLoadResult, ideal: number, intervalMs: number): boolean {
  return r.chunksPerSec < 0.9 * ideal || r.gapMs.p50 > 1.5 * intervalMs;
}

export function summarize(
  runs: readonly RowRun[],
  pacing: { chunks: number; intervalMs: number; lifetimeMs: number },
): RowSummary[] {
  const out: RowSummary[] = [];
  const find = (row: RowName, streams: number, round: number) =>
    runs.find((r) => r.row === row && r.streams === streams && r.round === round)?.result;
  for (const streams of [...new Set(runs.map((r) => r.streams))]) {
    const ideal = idealChunksPerSec(streams, pacing.chunks, pacing.lifetimeMs);
    for (const row of ROWS) {
      const mine = runs.filter((r) => r.row === row && r.streams === streams);
      if (mine.length === 0) continue;
      const per = <T>(f: (r: StreamLoadResult, d?: StreamLoadResult, n?: StreamLoadResult) => T) =>
        mine.map((m) =>
          f(m.result, find("direct", streams, m.round), find("nginx", streams, m.round)),
        );
      const added = (q: (r: StreamLoadResult) => number) =>
        median(per((r, d) => (d === undefined ? Number.NaN : q(r) - q(d))));
      const vsNginx = (q: (r: StreamLoadResult, d?: StreamLoadResult) => number) =>
        median(per((r, d, n) => (n === undefined ? Number.NaN : q(r, d) / q(n, d))));
      const addedFirst = (r: StreamLoadResult, d?: StreamLoadResult) =>
        d === undefined ? Number.NaN : r.firstChunkMs.p50 - d.firstChunkMs.p50;
      const total = (q: (r: StreamLoadResult) => number) => per(q).reduce((a, b) => a + b, 0);
      out.push({
        streams,
        row,
        rounds: mine.length,
        chunksPerSec: median(per((r) => r.chunksPerSec)),
        ofIdeal: median(per((r) => r.chunksPerSec / ideal)),
        headersP50Ms: median(per((r) => r.headersMs.p50)),
        headersP99Ms: median(per((r) => r.headersMs.p99)),
        firstChunkP50Ms: median(per((r) => r.firstChunkMs.p50)),
        firstChunkP99Ms: median(per((r) => r.firstChunkMs.p99)),
        addedFirstChunkP50Ms: added((r) => r.firstChunkMs.p50),
        addedFirstChunkP99Ms: added((r) => r.firstChunkMs.p99),
        gapP50Ms: median(per((r) => r.gapMs.p50)),
        gapP99Ms: median(per((r) => r.gapMs.p99)),
        addedGapP50Ms: added((r) => r.gapMs.p50),
        addedGapP99Ms: added((r) => r.gapMs.p99),
        cpuMicrosPerChunk: median(per(cpuPerChunk)),
        cpuFirstMicrosPerChunk: median(
          per((r) =>
            r.cpuFirstMicros === undefined || r.chunks === 0
              ? Number.NaN
              : r.cpuFirstMicros / r.chunks,
          ),
        ),
        rssPeakMB: median(per((r) => (r.rssPeakBytes ?? Number.NaN) / 2 ** 20)),
        rssPerStreamKB:
          median(
            per((r) => ((r.rssPeakBytes ?? Number.NaN) - (r.rssIdleBytes ?? Number.NaN)) / streams),
          ) / 1024,
        cpuVsNginx: vsNginx(cpuPerChunk),
        addedFirstChunkVsNginx: row === "direct" ? Number.NaN : vsNginx(addedFirst),
        firstChunkOverTargetMs:
          row === "direct"
            ? Number.NaN
            : median(
                per((r, d, n) =>
                  // nginx's added below zero is the round's noise: nothing added, a 1 ms limit.
                  n === undefined
                    ? Number.NaN
                    : addedFirst(r, d) - (1.5 * Math.max(0, addedFirst(n, d)) + 1),
                ),
              ),
        chunksPerSecVsNginx: vsNginx((r) => r.chunksPerSec),
        errors: total((r) => r.errors),
        incomplete: total((r) => r.incomplete),
        misordered: total((r) => r.misordered),
        behindRounds:
          row === "direct"
            ? per((r) => directBehind(r, ideal, pacing.intervalMs)).filter(Boolean).length
            : 0,
      });
    }
  }
  return out;
}

export function printSummary(rows: readonly RowSummary[]): void {
  printTable(
    [
      "C",
      "row",
      "chunks/s",
      "of ideal",
      "hdr p50",
      "hdr p99",
      "1st +p50",
      "1st +p99",
      "gap +p50",
      "gap +p99",
      "cpu µs/chunk",
      "cpu ×nginx",
      "1st+ ×nginx",
      "RSS MB",
      "KB/stream",
      "errors",
      "incomplete",
    ],
    rows.map((s) => [
      s.streams,
      s.row === "direct" && s.behindRounds > 0
        ? `direct (behind ${s.behindRounds}/${s.rounds})`
        : s.row,
      fmt(s.chunksPerSec, 0),
      fmt(s.ofIdeal, 2),
      fmt(s.headersP50Ms, 1),
      fmt(s.headersP99Ms, 1),
      fmt(s.addedFirstChunkP50Ms, 1),
      fmt(s.addedFirstChunkP99Ms, 1),
      fmt(s.addedGapP50Ms, 1),
      fmt(s.addedGapP99Ms, 1),
      fmt(s.cpuMicrosPerChunk, 1),
      fmt(s.cpuVsNginx, 2),
      fmt(s.addedFirstChunkVsNginx, 2),
      fmt(s.rssPeakMB, 0),
      fmt(s.rssPerStreamKB, 1),
      s.errors,
      s.incomplete + s.misordered,
    ]),
  );
  // Where a two-process row's CPU goes: the Node.js decider's own process, and its nginx; and the
  // added first chunk against the target (1.5 × nginx's added + 1 ms).
  for (const s of rows) {
    if (s.row !== "router-nginx" && s.row !== "nginx-floor") continue;
    if (Number.isFinite(s.firstChunkOverTargetMs)) {
      const over = s.firstChunkOverTargetMs;
      console.log(
        `C=${s.streams} ${s.row} 1st +p50 against 1.5 × nginx's + 1 ms: ${over <= 0 ? "met" : "missed"} by ${fmt(Math.abs(over), 1)} ms`,
      );
    }
    if (!Number.isFinite(s.cpuFirstMicrosPerChunk)) continue;
    const nginx = s.cpuMicrosPerChunk - s.cpuFirstMicrosPerChunk;
    const decider = s.row === "router-nginx" ? "radixgate" : "floor decider";
    console.log(
      `C=${s.streams} ${s.row} cpu µs/chunk: ${decider} ${fmt(s.cpuFirstMicrosPerChunk, 1)}, its nginx ${fmt(nginx, 1)}`,
    );
  }
}
