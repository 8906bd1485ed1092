import { describe, expect, it } from "vitest";
import {
  type CellSummary,
  cellPreset,
  deviationLines,
  MATRIX_CELLS,
  matrixGoalLines,
  QUICK_MATRIX_CELLS,
  replayCell,
  summarizeCell,
} from "../../bench/lib/routing-matrix.js";
import type { RowResult, WorkloadReport } from "../../bench/lib/routing-runner.js";
import {
  FEASIBLE_REQUESTS,
  FULL_PRESET,
  prepareWorkload,
  QUICK_PRESET,
} from "../../bench/lib/routing-workloads.js";
import { CHARS_PER_TOKEN } from "../../sim/tokenizer.js";
import { promptTextOf } from "../../sim/workloads.js";

describe("bench:routing --matrix cells", () => {
  it("covers every value of every axis the tenants family names", () => {
    const presets = MATRIX_CELLS.map((c) => cellPreset(FULL_PRESET, c));
    const values = (pick: (p: (typeof presets)[number]) => number) => new Set(presets.map(pick));
    expect(values((p) => p.tenants.tenants)).toEqual(new Set([8, 16, 64]));
    expect(values((p) => p.tenants.clients)).toEqual(new Set([4, 8, 32]));
    expect(values((p) => p.tenants.fleetKvShare)).toEqual(new Set([0.15, 0.3, 0.6]));
    expect(values((p) => p.tenants.zipfExponent)).toEqual(new Set([0.6, 1, 1.2]));
    expect(MATRIX_CELLS.length).toBeLessThanOrEqual(12);
    expect(QUICK_MATRIX_CELLS.length).toBeLessThan(MATRIX_CELLS.length);
  });

  it("changes only the cell's axes, never the base preset", () => {
    const before = structuredClone(FULL_PRESET);
    const p = cellPreset(FULL_PRESET, { name: "x", shape: { tenants: 64, clients: 32 } });
    expect(p.tenants.clients).toBe(32);
    expect(p.tenants.tenants).toBe(64);
    expect(p.tenants.zipfExponent).toBe(FULL_PRESET.tenants.zipfExponent);
    expect(FULL_PRESET).toEqual(before);
  });

  it("runs as many conversations at once as there are clients, and sizes the fleet's KV from the working set", () => {
    const p = cellPreset(QUICK_PRESET, { name: "x", shape: { clients: 4 } });
    const w = prepareWorkload("tenants", p);
    expect(w.concurrency).toBe(4);
    expect(w.specs).toHaveLength(p.tenants.conversations * p.tenants.turns);
    // Waves of 4 conversations: the first 4 requests are the first turns of conversations 0-3.
    expect(new Set(w.specs.slice(0, 4).map((s) => s.conversation))).toEqual(new Set([0, 1, 2, 3]));
    // The fleet (every worker together) holds the share, not each worker.
    expect(w.kvCapacityTokens).toBe(
      Math.ceil((w.workingSetTokens * p.tenants.fleetKvShare) / p.workers / 16) * 16,
    );
  });

  it("adds conversations where the fleet's share would leave a worker less than its largest request and a quarter", () => {
    const p = cellPreset(QUICK_PRESET, { name: "x", shape: { fleetKvShare: 0.15 } });
    const w = prepareWorkload("tenants", p);
    const largest = Math.max(...w.specs.map((s) => promptTextOf(s).length)) / CHARS_PER_TOKEN;
    expect(w.specs.length).toBeGreaterThan(p.tenants.conversations * p.tenants.turns);
    expect(w.kvCapacityTokens).toBeGreaterThanOrEqual(FEASIBLE_REQUESTS * largest);
    // Still the share of its own (larger) working set.
    expect(w.kvCapacityTokens).toBe(Math.ceil((w.workingSetTokens * 0.15) / p.workers / 16) * 16);
  });
});

function row(name: string, hits: number[], ttft: number, indexLoss = 0): RowResult {
  const mean = hits.reduce((s, h) => s + h, 0) / hits.length;
  return {
    row: name,
    hitRate: mean,
    ttftMs: { mean: ttft },
    spread: {
      hitRate: {
        mean,
        min: Math.min(...hits),
        max: Math.max(...hits),
        spread: Math.max(...hits) - Math.min(...hits),
      },
      ttftMeanMs: { mean: ttft, min: ttft, max: ttft, spread: 0 },
    },
    repeats: hits.map(() => ({ loadAverage: 2 })),
    ...(name === "oracle_sticky"
      ? {}
      : {
          account: {
            requests: 10,
            prompt: 1000,
            indexLoss: indexLoss * 1000,
            routingLoss: { load: 10, session: 0, filter: 0, unknown: 0 },
          },
        }),
  } as unknown as RowResult;
}

describe("bench:routing --matrix summaries and goals", () => {
  it("reads the worst repeat, the spread and the index loss against the cell's oracle", () => {
    const report = {
      rows: [row("prefix_cost", [0.8, 0.78, 0.81], 10, 0.05), row("oracle_sticky", [0.8], 12)],
    } as unknown as WorkloadReport;
    const [s] = summarizeCell("base", report);
    expect(s!.hitMin).toBe(0.78);
    expect(s!.hitSpread).toBeCloseTo(0.03);
    expect(s!.worstRatio).toBeCloseTo(0.78 / 0.8);
    expect(s!.indexLoss).toBeCloseTo(0.05);
    expect(s!.routingLoss).toBeCloseTo(0.01);
    const goals = matrixGoalLines([s!], "prefix_cost");
    expect(goals).toEqual([
      expect.stringMatching(/worst repeat .* met$/),
      expect.stringMatching(/spread .* MISSED in base$/),
      expect.stringMatching(/TTFT .* met$/),
      expect.stringMatching(/index loss .* MISSED in base$/),
    ]);
  });
});

describe("bench:routing --matrix --replay --seeds", () => {
  const summary = (
    cell: string,
    row: string,
    sd: number,
    hit: number,
    worst: number,
    ttft: number,
  ) =>
    ({
      cell,
      row,
      hitSd: sd,
      hitMean: hit,
      worstRatio: worst,
      ttftMeanMs: ttft,
      oracleTtftMeanMs: 10,
    }) as CellSummary;

  it("folds each row's cells and seeds into one line: mean and largest sd, cells over the goal's sd, the extremes", () => {
    const lines = deviationLines([
      summary("base@42", "prefix_cost", 0.002, 0.8, 0.99, 5),
      summary("base@7", "prefix_cost", 0.01, 0.9, 0.96, 12),
      summary("base@42", "prefix_cost:churn", 0.001, 0.85, 1.01, 4),
    ]);
    expect(lines).toEqual([
      "prefix_cost: sd mean 0.60, largest 1.00, over 0.43 in 1 of 2, hit mean 85.00%, worst ÷ oracle ≥ 0.960, TTFT ÷ oracle ≤ 1.20",
      "prefix_cost:churn: sd mean 0.10, largest 0.10, over 0.43 in 0 of 1, hit mean 85.00%, worst ÷ oracle ≥ 1.010, TTFT ÷ oracle ≤ 0.40",
    ]);
  });

  it("counts a cell whose sd is unknown as over the goal", () => {
    const [line] = deviationLines([summary("base@42", "prefix_cost", Number.NaN, 0.8, 1, 5)]);
    expect(line).toContain("over 0.43 in 1 of 1");
  });
});

describe("bench:routing --matrix --replay", () => {
  it("replays a cell in model time: the same figures on every run, against the cell's oracle", async () => {
    const preset = cellPreset(QUICK_PRESET, {
      name: "tiny",
      shape: { conversations: 8, turns: 2, tenants: 4, fleetKvShare: 4 },
    });
    const rows = ["prefix_cost", "oracle_sticky"];
    const [a] = await replayCell("tiny", preset, rows, 2, 1);
    const [b] = await replayCell("tiny", preset, rows, 2, 1);
    expect(a!.row).toBe("prefix_cost");
    expect(a!.hitMean).toBeGreaterThan(0);
    expect(a!.oracleHitMean).toBeGreaterThan(0);
    expect({ ...a, loadAverage: 0 }).toEqual({ ...b, loadAverage: 0 });
  });
});
