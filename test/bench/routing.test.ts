import { describe, expect, it } from "vitest";
import { runRoutingWorkload } from "../../bench/lib/routing-runner.js";
import { QUICK_PRESET, type RoutingPreset } from "../../bench/lib/routing-workloads.js";

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
});
