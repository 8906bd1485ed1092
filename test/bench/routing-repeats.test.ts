import { mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { mergeTraces, parseTrace } from "../../bench/lib/decision-trace-explain.js";
import { inlineFleetHost } from "../../bench/lib/fleet.js";
import {
  combineRepeats,
  pollPhaseMs,
  type RowRun,
  rangeOf,
  sampleSd,
} from "../../bench/lib/routing-repeats.js";
import {
  bucketQuantileMs,
  type RowLabel,
  type RowResult,
  runRoutingWorkload,
  type WorkloadReport,
} from "../../bench/lib/routing-runner.js";
import { knobOverrides, parseRowLabel } from "../../bench/lib/routing-variants.js";
import { QUICK_PRESET, type RoutingPreset } from "../../bench/lib/routing-workloads.js";
import { goalLines } from "../../bench/routing.js";

/** A shared-prefix run of 2 groups × `perGroup` short prompts, 4 clients, on a fast clock. */
function smallPreset(perGroup: number): RoutingPreset {
  return {
    ...QUICK_PRESET,
    concurrency: 4,
    timeScale: 0.05,
    kvCapacityTokens: 2048,
    sharedPrefix: {
      groups: 2,
      promptsPerGroup: perGroup,
      systemPromptTokens: 128,
      questionTokens: 16,
      outputTokens: 2,
    },
  };
}

/** One repeat's figures, the rest filled in plainly. */
function run(hitRate: number, ttfts: number[], perWorker: Record<string, number>): RowRun {
  const mean = ttfts.reduce((s, v) => s + v, 0) / ttfts.length;
  const summary = { count: ttfts.length, mean, p50: mean, p90: mean, p99: mean, max: mean };
  const result = {
    row: "prefix_cost",
    requests: ttfts.length,
    errors: 0,
    firstError: undefined,
    hitRate,
    promptTokens: 1000,
    cachedTokens: hitRate * 1000,
    ttftMs: summary,
    warmTtftMs: summary,
    e2eMs: summary,
    wallMs: 100,
    requestsPerSec: 10,
    outputTokensPerSec: 100,
    perWorker,
    loopUtilization: 0.5,
    branches: { lowest_cost: ttfts.length },
  } satisfies RowResult;
  return {
    result,
    repeat: {
      timingSeed: 1,
      pollPhaseMs: 0,
      loadAverage: 1,
      hitRate,
      ttftMeanMs: mean,
      warmTtftMeanMs: mean,
      e2eMeanMs: mean,
      requestsPerSec: 10,
      errors: 0,
      perWorker,
    },
    ttftMs: ttfts,
    warmTtftMs: ttfts,
    e2eMs: ttfts,
  };
}

describe("bench:routing repeats", () => {
  it("folds repeats into one row: mean hit rate, worst and spread, pooled TTFT, per-repeat requests per worker", () => {
    const row = combineRepeats([
      run(0.93, [10, 20], { w1: 1, w2: 1 }),
      run(0.9, [30, 40], { w1: 2, w2: 0 }),
      run(0.92, [20, 20], { w1: 2, w2: 0 }),
    ]);
    expect(row.hitRate).toBeCloseTo(0.9166667, 6);
    expect(row.spread!.hitRate.min).toBe(0.9);
    expect(row.spread!.hitRate.spread).toBeCloseTo(0.03, 12);
    expect(row.spread!.ttftMeanMs).toMatchObject({ min: 15, max: 35, spread: 20 });
    expect(row.spread!.ttftMeanMs.mean).toBeCloseTo(23.333333, 5);
    expect(row.ttftMs.mean).toBe(23.333333333333332);
    expect(row.ttftMs.count).toBe(6);
    expect(row.perWorker).toEqual({ w1: 2, w2: 0 });
    expect(row.branches).toEqual({ lowest_cost: 6 });
    expect(row.repeats).toHaveLength(3);
    expect(rangeOf([])).toMatchObject({ spread: 0 });
  });

  it("gives the repeats' sample standard deviation, skipping what is not finite", () => {
    expect(sampleSd([0.8, 0.82, 0.84])).toBeCloseTo(0.02, 12);
    expect(sampleSd([0.8, Number.NaN, 0.84])).toBeCloseTo(Math.SQRT2 * 0.02, 12);
    expect(sampleSd([0.8])).toBeNaN();
  });

  it("puts each timing seed's first engine poll somewhere else in the interval, the same way every time", () => {
    const phases = [1, 2, 3, 4, 5].map((seed) => pollPhaseMs(seed, 5000));
    for (const p of phases) expect(p >= 0 && p < 5000).toBe(true);
    expect(new Set(phases).size).toBe(5);
    expect(pollPhaseMs(3, 5000)).toBe(phases[2]);
    expect(pollPhaseMs(3, 0)).toBe(0);
  });

  it("reads row knobs, and refuses an unknown one", () => {
    expect(parseRowLabel("prefix_cost")).toEqual({ base: "prefix_cost", knobs: [] });
    expect(parseRowLabel("prefix_cost:poll-frozen+no-feedback")).toEqual({
      base: "prefix_cost",
      knobs: ["poll-frozen", "no-feedback"],
    });
    expect(() => parseRowLabel("prefix_cost:warp")).toThrow(/unknown row knob "warp"/);
    expect(knobOverrides(["budget-fixed", "rotation"], 1000)).toEqual({
      maxTreeSize: 4000,
      prefixCostTieBreak: "rotation",
    });
  });

  it("checks the default's spread, worst repeat and mean TTFT against the oracle on cache-pressure", () => {
    const spreadRow = (row: string, hits: number[], ttft: number) => {
      const r = combineRepeats(hits.map((h) => run(h, [ttft], { w1: 1 })));
      return { ...r, row };
    };
    const report = {
      workload: "cache-pressure",
      bypassShare: 0,
      replicas: 1,
      rows: [
        spreadRow("prefix_cost", [0.93, 0.925, 0.92], 20),
        spreadRow("oracle_sticky", [0.93, 0.93, 0.93], 21),
      ],
    } as unknown as WorkloadReport;
    const lines = goalLines(report).filter((l) => /repeat|over the repeats/.test(l));
    expect(lines).toEqual([
      "goal: prefix_cost hit-rate spread over 3 repeats ≤ 1 point: 92.0%-93.0% (1.0) → met",
      "goal: prefix_cost worst repeat ≥ 0.97× the oracle's hit rate: 92.0% vs 93.0% (0.989×) → met",
      "goal: prefix_cost mean TTFT over the repeats ≤ the oracle's: 20.0 vs 21.0 ms → met",
    ]);
  });

  it("runs every row the asked number of times on the same requests, each with its timing seed", async () => {
    const tiny: RoutingPreset = {
      ...QUICK_PRESET,
      concurrency: 8,
      timeScale: 0.05,
      kvCapacityTokens: 2048,
      sharedPrefix: {
        groups: 4,
        promptsPerGroup: 4,
        systemPromptTokens: 256,
        questionTokens: 16,
        outputTokens: 4,
      },
    };
    const report = await runRoutingWorkload("shared-prefix", {
      preset: tiny,
      rows: ["prefix_cost", "prefix_cost:rotation+poll-frozen"],
      repeats: 2,
      timingSeed: 5,
      warmupRequests: 0,
      isolate: false,
    });
    expect(report.rows.map((r) => r.row)).toEqual([
      "prefix_cost",
      "prefix_cost:rotation+poll-frozen",
    ]);
    for (const row of report.rows) {
      expect(row.repeats!.map((r) => r.timingSeed)).toEqual([5, 6]);
      expect(row.errors).toBe(0);
      expect(row.ttftMs.count).toBe(32);
      expect(row.spread!.hitRate.min).toBeGreaterThan(0);
    }
    expect(
      report.rows[1]!.repeats!.every((r) => r.pollPhaseMs === pollPhaseMs(r.timingSeed, 5000)),
    ).toBe(true);
  }, 60_000);

  it("warms each row once across workloads when given the set of rows already warmed", async () => {
    const tiny = smallPreset(2);
    const inner = inlineFleetHost();
    let fleets = 0;
    const host = {
      startFleet: (o: Parameters<typeof inner.startFleet>[0]) => {
        fleets += 1;
        return inner.startFleet(o);
      },
      close: () => inner.close(),
    };
    const warmed = new Set<RowLabel>();
    const o = { preset: tiny, rows: ["prefix_cost"] as RowLabel[], warmupRequests: 4, host };
    try {
      await runRoutingWorkload("shared-prefix", { ...o, warmed });
      expect(fleets).toBe(2); // the warm-up's fleet and the measured run's
      expect([...warmed]).toEqual(["prefix_cost"]);
      await runRoutingWorkload("shared-prefix", { ...o, warmed });
      expect(fleets).toBe(3);
      await runRoutingWorkload("shared-prefix", o);
      expect(fleets).toBe(5);
    } finally {
      await host.close();
    }
  }, 60_000);

  it("writes each router's decision trace of the measured runs, one file per replica", async () => {
    const tiny = smallPreset(4);
    const dir = mkdtempSync(join(tmpdir(), "routing-trace-"));
    await runRoutingWorkload("shared-prefix", {
      preset: tiny,
      rows: ["prefix_cost"],
      warmupRequests: 4,
      replicas: 2,
      isolate: false,
      decisionTraceDir: dir,
    });
    const files = readdirSync(dir).sort();
    expect(files).toEqual([
      "shared-prefix-prefix_cost-t1-r0.jsonl",
      "shared-prefix-prefix_cost-t1-r1.jsonl",
    ]);
    // The two replicas' traces together: every measured request once, no warm-up request.
    const merged = mergeTraces(files.map((f) => parseTrace(readFileSync(join(dir, f), "utf8"))));
    expect(merged.decisions).toHaveLength(8);
    expect(merged.decisions.every((d, i) => i === 0 || merged.decisions[i - 1]!.t <= d.t)).toBe(
      true,
    );
  }, 60_000);
});

describe("the replicas' measured lags", () => {
  it("reads a quantile's bucket bound from cumulative counts, in ms", () => {
    const buckets = { "0.001": 2, "0.005": 6, "0.05": 9, "+Inf": 10 };
    expect(bucketQuantileMs(buckets, 0.2)).toBe(1);
    expect(bucketQuantileMs(buckets, 0.5)).toBe(5);
    expect(bucketQuantileMs(buckets, 0.9)).toBe(50);
    expect(bucketQuantileMs(buckets, 1)).toBe(Number.POSITIVE_INFINITY);
    expect(bucketQuantileMs({ "0.001": 0, "+Inf": 0 }, 0.5)).toBeUndefined();
  });
});
