import { describe, expect, it } from "vitest";
import { cellPreset } from "../../bench/lib/routing-matrix.js";
import { decomposeSwings, swingSpreads } from "../../bench/lib/routing-swings.js";
import { QUICK_PRESET } from "../../bench/lib/routing-workloads.js";

describe("bench:routing --swings", () => {
  it("reads the spread across decisions from the grid's rows and across timing from its columns", () => {
    const spreads = swingSpreads({
      cell: "x",
      row: "prefix_cost",
      own: [0.8, 0.83],
      // Run 0's decisions give 0.80 whatever the timing, run 1's 0.83: the decisions swing.
      grid: [
        [0.8, 0.801],
        [0.83, 0.831],
      ],
      frozenFirst: [0.81, 0.81],
      moves: [0, 2],
    });
    expect(spreads.own).toBeCloseTo(0.03, 9);
    expect(spreads.acrossDecisions).toBeCloseTo(0.03, 9);
    expect(spreads.acrossTiming).toBeCloseTo(0.001, 9);
    expect(spreads.frozenFirst).toBe(0);
  });

  it("replays each run's own decisions pinned to the run's own hit rate", async () => {
    const preset = cellPreset(QUICK_PRESET, {
      name: "tiny",
      shape: { conversations: 4, turns: 2, tenants: 3, fleetKvShare: 0.6 },
    });
    const a = await decomposeSwings("tiny", preset, "prefix_cost", 2, 1, 0.2);
    expect(a.grid).toHaveLength(2);
    expect(a.grid.every((line) => line.length === 2)).toBe(true);
    // Pinned to its own choices under its own timing, a run replays to the same hit rate.
    for (let i = 0; i < 2; i++) expect(a.grid[i]![i]).toBeCloseTo(a.own[i]!, 9);
  });
});
