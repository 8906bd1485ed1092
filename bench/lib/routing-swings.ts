/**
 * bench:routing --matrix --replay --jitter <share> --swings: where a router row's spread between
 * identical runs comes from. Every timing seed's run is replayed in model time; then each run's
 * decisions (request -> worker) are replayed pinned under every other timing seed, and each run's
 * first placements (tenant -> the worker of its first request) are replayed pinned under its own.
 *
 * - Across decisions: the range of the grid's row means (one run's decisions, every timing). When
 *   it is as wide as the row's own spread, the swing is the router's choices, not the engines.
 * - Across timing: the range of the column means (every run's decisions, one timing): what the
 *   engines' step times alone move (eviction order, which request a step batches).
 * - First placements frozen: each run's tenant -> worker map kept for every request. When its
 *   spread is the row's own, the swing is where new tenants first went; when it is narrow, it is
 *   the later moves of tenants between workers.
 * - Moves: requests that went to another worker than their tenant's previous request.
 */

import { replayPolicy, replayTiming } from "./routing-matrix.js";
import { rangeOf } from "./routing-repeats.js";
import { prepareWorkload, type RoutingPreset } from "./routing-workloads.js";
import { printTable } from "./stats.js";
import type { ReplayResult } from "./ttft-replay.js";
import { replay } from "./ttft-replay.js";

export interface SwingDecomposition {
  cell: string;
  row: string;
  /** Hit rate of each timing seed's own run. */
  own: number[];
  /** grid[i][j]: run i's decisions pinned under timing seed j. */
  grid: number[][];
  /** Run i's first placements pinned under its own timing seed. */
  frozenFirst: number[];
  /** Requests that moved their tenant to another worker, per run. */
  moves: number[];
}

/** Each request's tenant, in the order the router decided them (admission order). */
function decisionsOf(r: ReplayResult): {
  perRequest: Map<string, number>;
  first: Map<number, number>;
  moves: number;
} {
  const perRequest = new Map<string, number>();
  const first = new Map<number, number>();
  const last = new Map<number, number>();
  let moves = 0;
  for (const x of [...r.requests].sort((a, b) => a.admitted - b.admitted)) {
    perRequest.set(x.spec.id, x.worker);
    const tenant = x.spec.group ?? 0;
    const before = last.get(tenant);
    if (before === undefined) first.set(tenant, x.worker);
    else if (before !== x.worker) moves++;
    last.set(tenant, x.worker);
  }
  return { perRequest, first, moves };
}

/** The decomposition of one router row of one cell over `repeats` timing seeds (one workload seed). */
export async function decomposeSwings(
  cell: string,
  preset: RoutingPreset,
  row: string,
  repeats: number,
  firstSeed: number,
  jitter: number,
): Promise<SwingDecomposition> {
  const w = prepareWorkload("tenants", preset);
  const timing = (i: number) => replayTiming(preset, w, firstSeed + i, jitter);
  const runs: ReturnType<typeof decisionsOf>[] = [];
  const own: number[] = [];
  for (let i = 0; i < repeats; i++) {
    const r = await replay(w, {
      ...timing(i),
      chooser: { kind: "policy", policy: replayPolicy(row) },
    });
    own.push(r.hitRate);
    runs.push(decisionsOf(r));
  }
  const grid: number[][] = [];
  const frozenFirst: number[] = [];
  for (let i = 0; i < repeats; i++) {
    const { perRequest, first } = runs[i]!;
    const line: number[] = [];
    for (let j = 0; j < repeats; j++) {
      const r = await replay(w, {
        ...timing(j),
        chooser: { kind: "pinned", workerOf: (spec) => perRequest.get(spec.id) ?? 0 },
      });
      line.push(r.hitRate);
    }
    grid.push(line);
    const r = await replay(w, {
      ...timing(i),
      chooser: { kind: "pinned", workerOf: (spec) => first.get(spec.group ?? 0) ?? 0 },
    });
    frozenFirst.push(r.hitRate);
  }
  return { cell, row, own, grid, frozenFirst, moves: runs.map((r) => r.moves) };
}

/** The spreads a decomposition reads (shares: 0.015 = 1.5 points). */
export function swingSpreads(d: SwingDecomposition): {
  own: number;
  acrossDecisions: number;
  acrossTiming: number;
  frozenFirst: number;
} {
  const mean = (xs: readonly number[]) => xs.reduce((s, x) => s + x, 0) / xs.length;
  const columns = d.grid[0]?.map((_, j) => d.grid.map((line) => line[j]!)) ?? [];
  return {
    own: rangeOf(d.own).spread,
    acrossDecisions: rangeOf(d.grid.map(mean)).spread,
    acrossTiming: rangeOf(columns.map(mean)).spread,
    frozenFirst: rangeOf(d.frozenFirst).spread,
  };
}

const points = (x: number) => (x * 100).toFixed(1);

export function printSwings(list: readonly SwingDecomposition[]): void {
  printTable(
    [
      "cell",
      "policy",
      "spread",
      "across decisions",
      "across timing",
      "first placements frozen: spread",
      "frozen mean",
      "own mean",
      "moves",
    ],
    list.map((d) => {
      const s = swingSpreads(d);
      const mean = (xs: readonly number[]) => xs.reduce((a, x) => a + x, 0) / xs.length;
      return [
        d.cell,
        d.row,
        points(s.own),
        points(s.acrossDecisions),
        points(s.acrossTiming),
        points(s.frozenFirst),
        `${points(mean(d.frozenFirst))}%`,
        `${points(mean(d.own))}%`,
        `${Math.min(...d.moves)}-${Math.max(...d.moves)}`,
      ];
    }),
  );
}
