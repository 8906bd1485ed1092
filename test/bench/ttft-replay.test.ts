import { describe, expect, it } from "vitest";
import { prepareWorkload, QUICK_PRESET } from "../../bench/lib/routing-workloads.js";
import {
  type BuiltLeaderSwitches,
  type ReplayResult,
  type ReplicaAttribution,
  type ReplicaModel,
  replay,
} from "../../bench/lib/ttft-replay.js";
import { renderChat } from "../../sim/template.js";
import { tokenize } from "../../sim/tokenizer.js";
import type { RequestSpec } from "../../sim/workloads.js";
import { DEFAULT_TIER_WEIGHTS, parseTierWeights } from "../../src/index/kv-tiers.js";
import { createPolicy, type PolicyOptions } from "../../src/scheduling/builtin-profiles.js";

const workload = prepareWorkload("cache-pressure", QUICK_PRESET);
const base = { workers: QUICK_PRESET.workers, concurrency: QUICK_PRESET.concurrency };
const prefixCost = (options: PolicyOptions = {}) => ({
  kind: "policy" as const,
  policy: createPolicy("prefix_cost", options),
});
/** Replicas sharing state as the tests run them (model ms), with the fields a test sets. */
const replicaModel = (fields: Partial<ReplicaModel> = {}): ReplicaModel => ({
  count: 2,
  delayMs: 10,
  loadIntervalMs: 1250,
  claimTtlMs: 10_000,
  rankHoldMs: 0,
  seed: 1,
  policyOf: () => createPolicy("prefix_cost", {}),
  ...fields,
});
const placement = (r: ReplayResult) =>
  Object.fromEntries(r.requests.map((x) => [x.spec.id, x.worker]));

describe("bench:ttft replay (model time, deterministic)", () => {
  it("gives the same figures on every run, and each TTFT splits into wait + own + others + rest", async () => {
    const a = await replay(workload, { ...base, chooser: prefixCost() });
    const b = await replay(workload, { ...base, chooser: prefixCost() });
    expect(a.requests).toHaveLength(workload.specs.length);
    expect(b.requests.map((x) => x.ttft)).toEqual(a.requests.map((x) => x.ttft));
    expect(b.hitRate).toBe(a.hitRate);
    for (const x of a.requests) {
      expect(x.wait + x.own + x.others + x.rest).toBeCloseTo(x.ttft, 6);
      // Nothing beats the same prefill on an idle engine.
      expect(x.ttft).toBeGreaterThanOrEqual(x.alone - 1e-6);
      expect(x.cachedTokens).toBeLessThan(x.promptTokens);
    }
    // A chat's turn is sent only after the previous turn's reply.
    const byId = new Map(a.requests.map((x) => [x.spec.id, x]));
    for (const x of a.requests) {
      if (!x.spec.turn) continue;
      const previous = byId.get(`cp-c${x.spec.conversation}-t${x.spec.turn - 1}`)!;
      expect(x.arrival).toBeGreaterThan(previous.firstToken);
    }
  });

  it("jitter: a timing seed replays the same figures, another seed places the same requests otherwise", async () => {
    const run = (seed: number) =>
      replay(workload, { ...base, chooser: prefixCost(), jitter: { seed, share: 0.2 } });
    const a = await run(1);
    expect((await run(1)).requests.map((x) => x.ttft)).toEqual(a.requests.map((x) => x.ttft));
    // Steps a little faster or slower move some decisions, as in identical real-time runs.
    expect(placement(await run(2))).not.toEqual(placement(a));
    // Share 0 is the unjittered replay.
    const still = await replay(workload, {
      ...base,
      chooser: prefixCost(),
      jitter: { seed: 2, share: 0 },
    });
    const plain = await replay(workload, { ...base, chooser: prefixCost() });
    expect(still.requests.map((x) => x.ttft)).toEqual(plain.requests.map((x) => x.ttft));
  });

  it("replicas: the attribution against one router changes no decision and accounts for each", async () => {
    const replicas = replicaModel();
    const run = (attribution?: ReplicaAttribution) =>
      replay(workload, {
        ...base,
        chooser: prefixCost(),
        replicas,
        ...(attribution !== undefined ? { attribution } : {}),
      });
    const attribution: ReplicaAttribution = { decisions: 0, agree: 0, differ: new Map() };
    const watched = await run(attribution);
    const plain = await run();
    expect(placement(watched)).toEqual(placement(plain));
    expect(watched.hitRate).toBe(plain.hitRate);
    expect(attribution.decisions).toBe(watched.requests.length + watched.rejected.length);
    const differ = [...attribution.differ.values()].reduce((s, e) => s + e.count, 0);
    expect(attribution.agree + differ).toBe(attribution.decisions);
    // Two replicas with ops on the way part from one router somewhere, and not everywhere.
    expect(differ).toBeGreaterThan(0);
    expect(attribution.agree).toBeGreaterThan(differ);
    for (const key of attribution.differ.keys())
      expect(key).toMatch(
        /^(new|held)(:less|:more|:both)?\/(wait|claim|either|tree|load|tree\+load)$/,
      );
  });

  it("replicas asking one leader for every decision decide as one router, and the ask costs time", async () => {
    const replicas = (delayMs: number) => replicaModel({ count: 3, delayMs, decider: "leader" });
    const one = await replay(workload, { ...base, chooser: prefixCost() });
    // At once, the leader's view is one router's: the same placement, the same TTFTs.
    const atOnce = await replay(workload, {
      ...base,
      chooser: prefixCost(),
      replicas: replicas(0),
    });
    expect(placement(atOnce)).toEqual(placement(one));
    expect(atOnce.requests.map((x) => x.ttft)).toEqual(one.requests.map((x) => x.ttft));
    // Four legs for the requests of the other two replicas: about two thirds of them wait 40 ms.
    const late = await replay(workload, { ...base, chooser: prefixCost(), replicas: replicas(10) });
    const asked = late.requests.filter((x) => x.wait >= 40).length / late.requests.length;
    expect(asked).toBeGreaterThan(0.5);
    expect(asked).toBeLessThan(0.85);
  });

  it("leader-built: only a follower's new prefixes wait for the ask, and each switch moves decisions", async () => {
    const replicas = (built: BuiltLeaderSwitches) =>
      replicaModel({ count: 3, decider: "leader-built", built });
    const run = (built: BuiltLeaderSwitches) =>
      replay(workload, { ...base, chooser: prefixCost(), replicas: replicas(built) });
    const built = await run({});
    expect(built.requests).toHaveLength(workload.specs.length);
    expect(placement(await run({}))).toEqual(placement(built));
    // Four legs of 10 ms, for some requests and far fewer than every follower's (two thirds).
    const asked = built.requests.filter((x) => x.wait >= 40).length / built.requests.length;
    expect(asked).toBeGreaterThan(0);
    expect(asked).toBeLessThan(0.4);
    const all = { leaderRecords: true, askEach: true, leaderCounts: true };
    for (const switches of [{ ownTree: true }, all])
      expect(placement(await run(switches))).not.toEqual(placement(built));
  });

  it("pins every request where the oracle says", async () => {
    const r = await replay(workload, {
      ...base,
      chooser: { kind: "pinned", workerOf: workload.oracle! },
    });
    for (const x of r.requests) expect(x.worker).toBe(workload.oracle!(x.spec, base.workers));
  });

  it("with one router the engine poll changes no decision: its queue holds only the router's own requests", async () => {
    const quiet = await replay(workload, { ...base, chooser: prefixCost() });
    // Many readings, each soon stale against the router's count now.
    const polled = { ...base, chooser: prefixCost(), enginePollMs: 20, enginePollPhaseMs: 7 };
    expect(placement(await replay(workload, polled))).toEqual(placement(quiet));
    // Counted against the router's pending requests now (before 2026-11-23), old readings turn
    // into phantom foreign work and move requests (seen without the eviction term, which keeps
    // most of them on their holders anyway).
    const unguarded = prefixCost({ prefixCostEvictionWeight: 0 });
    const quiet0 = await replay(workload, { ...base, chooser: unguarded });
    const againstNow = await replay(workload, {
      ...polled,
      chooser: unguarded,
      foreignAgainstNow: true,
    });
    expect(placement(againstNow)).not.toEqual(placement(quiet0));
  });

  it("refuses a request larger than the whole KV cache with the engine's error and goes on", async () => {
    const longest = Math.max(...workload.specs.map((x) => x.maxTokens + promptLength(x)));
    // The cache holds every request but the longest few (the poll's timer keeps running).
    const small = { ...workload, kvCapacityTokens: Math.floor(longest * 0.9) };
    for (const chooser of [prefixCost(), { kind: "pinned" as const, workerOf: workload.oracle! }]) {
      const r = await replay(small, { ...base, chooser, enginePollMs: 20 });
      expect(r.rejected.length).toBeGreaterThan(0);
      expect(r.rejected.length + r.requests.length).toBe(workload.specs.length);
      for (const x of r.rejected) expect(x.error).toMatch(/exceed the KV cache capacity/);
    }
  });
});

/** Prompt tokens of a spec, as the replay renders and tokenizes it. */
function promptLength(spec: RequestSpec): number {
  const prompt = spec.kind === "chat" ? renderChat(spec.messages ?? []) : (spec.prompt ?? "");
  return tokenize(prompt).length;
}

describe("bench:ttft replay over the engines' KV events (the precise index)", () => {
  it("offload: crediting the CPU tier keeps each system prompt where it is held, for more hits and a lower TTFT than the GPU cache alone", async () => {
    const offload = prepareWorkload("offload", QUICK_PRESET);
    const o = { workers: QUICK_PRESET.workers, concurrency: offload.concurrency! };
    const run = (weights: string) =>
      replay(offload, {
        ...o,
        chooser: {
          kind: "precise",
          policy: createPolicy("prefix_cost"),
          tierWeights: parseTierWeights(weights),
        },
      });
    const aware = await run(DEFAULT_TIER_WEIGHTS);
    const blind = await run("gpu=1,cpu=0,disk=0");
    expect(aware.hitRate).toBeGreaterThan(blind.hitRate + 0.2);
    const mean = (r: ReplayResult) =>
      r.requests.reduce((s, x) => s + x.ttft, 0) / r.requests.length;
    expect(mean(aware)).toBeLessThan(mean(blind));
  });
});
