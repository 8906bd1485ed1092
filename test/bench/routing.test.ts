import { describe, expect, it } from "vitest";
import {
  bypassTarget,
  replicaOf,
  runRoutingWorkload,
  type WorkloadReport,
} from "../../bench/lib/routing-runner.js";
import {
  prepareWorkload,
  QUICK_PRESET,
  type RoutingPreset,
} from "../../bench/lib/routing-workloads.js";
import { goalLines } from "../../bench/routing.js";
import { redisSkipReason, startRedis } from "../helpers/redis.js";

/** bench:routing at toy size: 8 system prompts × 8 questions over 4 workers that each hold half. */
const TINY: RoutingPreset = {
  ...QUICK_PRESET,
  name: "test",
  concurrency: 8,
  timeScale: 0.05,
  kvCapacityTokens: 2048,
  seed: 7,
  sharedPrefix: {
    groups: 8,
    promptsPerGroup: 8,
    systemPromptTokens: 512,
    questionTokens: 32,
    outputTokens: 8,
  },
};

describe("bench:routing end to end (real router, simulated fleet)", () => {
  it("cache_aware keeps shared prefixes cached far better than round_robin", async () => {
    const report = await runRoutingWorkload("shared-prefix", {
      preset: TINY,
      rows: ["cache_aware", "round_robin", "oracle_sticky"],
      isolate: false,
      warmupRequests: 0,
    });
    const row = (name: string) => {
      const r = report.rows.find((x) => x.row === name);
      if (r === undefined) throw new Error(`no row ${name}`);
      return r;
    };
    const ca = row("cache_aware");
    const rr = row("round_robin");
    const oracle = row("oracle_sticky");
    for (const r of report.rows) {
      expect(r.errors, `${r.row}: ${r.firstError}`).toBe(0);
      expect(r.requests).toBe(64);
      // Every request reached a worker exactly once (the workers' own counters).
      expect(Object.values(r.perWorker).reduce((a, b) => a + b, 0)).toBe(64);
      expect(r.ttftMs.count).toBe(64);
    }
    expect(Object.values(rr.perWorker)).toEqual([16, 16, 16, 16]);
    expect(ca.branches.cache_hit).toBeGreaterThan(0);
    // With the working set at twice one worker's KV, only affinity keeps prefixes cached.
    expect(ca.hitRate).toBeGreaterThan(rr.hitRate + 0.2);
    expect(ca.hitRate).toBeGreaterThan(oracle.hitRate * 0.8);
  });

  it("splits a precise row over two replicas, tells routed from bypassing hits, and tallies decisions", async () => {
    const report = await runRoutingWorkload("shared-prefix", {
      preset: TINY,
      rows: ["precise"],
      replicas: 2,
      bypassShare: 0.25,
      diagnose: true,
      isolate: false,
      warmupRequests: 0,
    });
    expect(report.replicas).toBe(2);
    expect(report.bypassShare).toBe(0.25);
    // The default bypassing client is an independent one, not the oracle's mapping.
    expect(report.bypassTo).toBe("sticky");
    const row = report.rows[0]!;
    expect(row.errors, row.firstError).toBe(0);
    expect(Object.values(row.perWorker).reduce((a, b) => a + b, 0)).toBe(64);
    // Both replicas decided (their decision counters are summed), and only the routed requests.
    const decisions = Object.values(row.branches).reduce((a, b) => a + b, 0);
    expect(decisions).toBeGreaterThan(32);
    expect(decisions).toBeLessThan(64);
    expect(row.diagnosis?.decisions).toBe(decisions);
    expect(row.split?.routedHitRate).toBeGreaterThan(0);
    expect(row.split?.bypassHitRate).toBeGreaterThanOrEqual(0);
  });
});

describe.skipIf(redisSkipReason !== undefined)("bench:routing --shared-state", () => {
  it("gives each row's replicas one Redis key prefix of their own, and they publish through it", async () => {
    const redis = await startRedis();
    try {
      const report = await runRoutingWorkload("shared-prefix", {
        preset: TINY,
        rows: ["prefix_cost", "cache_aware"],
        replicas: 2,
        sharedStateUrl: redis.url,
        isolate: false,
        warmupRequests: 0,
      });
      expect(report.sharedState).toBe(true);
      for (const row of report.rows) expect(row.errors, row.firstError).toBe(0);
      const keys = await redis.client.keys("bench-routing:*");
      const prefixes = new Set(keys.map((k) => k.split(":").slice(0, 3).join(":")));
      expect([...prefixes].map((p) => p.split(":")[1]).sort()).toEqual([
        "cache_aware",
        "prefix_cost",
      ]);
    } finally {
      await redis.stop();
    }
  });
});

describe("replicaOf", () => {
  it("spreads requests over every replica, the same way on every call", () => {
    const specs = Array.from({ length: 400 }, (_, i) => ({
      id: `r${i}`,
      kind: "completion" as const,
      prompt: "x",
      maxTokens: 1,
    }));
    const counts = [0, 0];
    for (const spec of specs) counts[replicaOf(spec, 2)]!++;
    expect(Math.min(...counts)).toBeGreaterThan(150);
    expect(specs.map((s) => replicaOf(s, 2))).toEqual(specs.map((s) => replicaOf(s, 2)));
    expect(replicaOf(specs[0]!, 1)).toBe(0);
  });
});

describe("bypassTarget", () => {
  const w = prepareWorkload("shared-prefix", QUICK_PRESET);
  const workers = 4;
  const bypassing = (to: "oracle" | "sticky" | "spread") =>
    w.specs
      .map((spec) => ({ spec, target: bypassTarget(spec, w, 0.25, workers, to) }))
      .filter(
        (x): x is { spec: (typeof w.specs)[number]; target: number } => x.target !== undefined,
      );

  it("picks the same requests whatever the target, about the share asked for", () => {
    const ids = (to: "oracle" | "sticky" | "spread") => bypassing(to).map((x) => x.spec.id);
    expect(ids("sticky")).toEqual(ids("oracle"));
    expect(ids("spread")).toEqual(ids("oracle"));
    const share = ids("oracle").length / w.specs.length;
    expect(share).toBeGreaterThan(0.15);
    expect(share).toBeLessThan(0.35);
    expect(bypassTarget(w.specs[0]!, w, 0, workers, "sticky")).toBeUndefined();
    // Default: the independent sticky client.
    for (const { spec, target } of bypassing("sticky"))
      expect(bypassTarget(spec, w, 0.25, workers)).toBe(target);
  });

  it("oracle: the oracle's worker; sticky: one worker per group, mostly not the oracle's; spread: per request", () => {
    for (const { spec, target } of bypassing("oracle"))
      expect(target).toBe(w.oracle!(spec, workers));
    const stickyByGroup = new Map<number, Set<number>>();
    for (const { spec, target } of bypassing("sticky")) {
      const group = w.group!(spec);
      stickyByGroup.set(group, (stickyByGroup.get(group) ?? new Set()).add(target));
    }
    for (const targets of stickyByGroup.values()) expect(targets.size).toBe(1);
    const groups = [...stickyByGroup.keys()];
    const agree = groups.filter((g) => stickyByGroup.get(g)!.has(g % workers)).length;
    // An independent mapping agrees with the oracle's for about a quarter of the groups.
    expect(agree).toBeLessThan(groups.length / 2);
    const spreadByGroup = new Map<number, Set<number>>();
    for (const { spec, target } of bypassing("spread")) {
      const group = w.group!(spec);
      spreadByGroup.set(group, (spreadByGroup.get(group) ?? new Set()).add(target));
    }
    expect([...spreadByGroup.values()].some((targets) => targets.size > 1)).toBe(true);
    for (const to of ["oracle", "sticky", "spread"] as const)
      for (const { target } of bypassing(to)) expect(target).toBeLessThan(workers);
  });
});

describe("goalLines", () => {
  const report = (bypassShare: number, replicas: number, precise: number, oracle: number) =>
    ({
      workload: "shared-prefix",
      bypassShare,
      replicas,
      rows: [
        { row: "precise", hitRate: precise },
        { row: "oracle_sticky", hitRate: oracle },
      ],
    }) as unknown as WorkloadReport;

  it("checks precise against the oracle where the trees lose (bypass traffic, replicas) only", () => {
    expect(goalLines(report(0.25, 1, 0.8, 0.9))).toEqual([
      "goal: precise hit rate ≥ the oracle's: 80.0% vs 90.0% → MISSED",
    ]);
    expect(goalLines(report(0, 2, 0.9, 0.9))[0]).toMatch(/→ met$/);
    expect(goalLines(report(0, 1, 0.8, 0.9))).toEqual([]);
  });
});
