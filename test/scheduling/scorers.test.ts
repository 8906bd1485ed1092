import { describe, expect, it } from "vitest";
import {
  LoraAffinityScorer,
  SessionAffinityScorer,
} from "../../src/scheduling/affinity-scorers.js";
import {
  ActiveRequestScorer,
  KvCacheUtilizationScorer,
  QueueScorer,
} from "../../src/scheduling/load-scorers.js";
import {
  DynamoCostScorer,
  PrefillWorkScorer,
  PrefixScorer,
} from "../../src/scheduling/prefix-scorers.js";
import { context, scores, worker } from "./helpers.js";

describe("queue-scorer (GIE queue.go)", () => {
  it("normalises min..max: the shortest queue 1, the longest 0, linear between", () => {
    const ws = [0, 5, 10].map((q, i) => worker(`w${i}`, { pendingPrefillRequests: q }));
    expect(scores(new QueueScorer("q"), context(ws))).toEqual([1, 0.5, 0]);
  });

  it("gives every worker 1.0 when the queues are equal", () => {
    const ws = [3, 3, 3].map((q, i) => worker(`w${i}`, { pendingPrefillRequests: q }));
    expect(scores(new QueueScorer("q"), context(ws))).toEqual([1, 1, 1]);
  });

  it("adds what the engine reports queued by others to the router's own waiting requests", () => {
    const ws = [worker("a", { foreign: 4 }), worker("b", { pendingPrefillRequests: 2 })];
    expect(scores(new QueueScorer("q"), context(ws))).toEqual([0, 1]);
  });

  it("normalises over the candidates still alive only", () => {
    const ws = [0, 5, 100].map((q, i) => worker(`w${i}`, { pendingPrefillRequests: q }));
    const ctx = context(ws);
    ctx.alive[2] = 0;
    expect(scores(new QueueScorer("q"), ctx).slice(0, 2)).toEqual([1, 0]);
  });
});

describe("kv-cache-utilization-scorer", () => {
  it("is 1 − the reported KV usage, 1 when nothing fresh is known", () => {
    const ws = [
      worker("a", { engine: { queued: 0, running: 0, kvUsage: 0.25 } }),
      worker("b", { engine: { queued: 0, running: 0, kvUsage: 1 } }),
      worker("c"),
    ];
    expect(scores(new KvCacheUtilizationScorer("kv"), context(ws))).toEqual([0.75, 0, 1]);
  });
});

describe("active-request-scorer", () => {
  it("normalises in-flight counts min..max", () => {
    const ws = [4, 0, 8].map((n, i) => worker(`w${i}`, { inFlight: n }));
    expect(scores(new ActiveRequestScorer("a"), context(ws))).toEqual([0.5, 1, 0]);
  });
});

describe("prefix-cache-scorer", () => {
  const text = "x".repeat(200);
  it("scores the matched share of the prompt in characters", () => {
    const ctx = context([worker("a"), worker("b")], { text, matched: [50, 500] });
    expect(scores(new PrefixScorer("p", 0), ctx)).toEqual([0.25, 1]);
  });

  it("with blocks, counts whole matched blocks over the prompt's whole blocks", () => {
    // 200 chars in blocks of 64: 3 whole blocks (the tail is not hashed); 130 matched = 2 blocks,
    // 192 = all 3 (what a block-hash index reports for the whole prompt).
    const ctx = context([worker("a"), worker("b"), worker("c")], {
      text,
      matched: [130, 192, 200],
    });
    expect(scores(new PrefixScorer("p", 64), ctx)).toEqual([2 / 3, 1, 1]);
  });

  it("scores 0 for an empty text", () => {
    expect(scores(new PrefixScorer("p", 64), context([worker("a")], { text: "" }))).toEqual([0]);
  });
});

describe("prefill-work-scorer", () => {
  it("scores prefix_cost's cost inverted: the least work 1, the most 0", () => {
    const text = "y".repeat(1000);
    const ws = [worker("cold"), worker("warm"), worker("busy", { pendingPrefillChars: 4000 })];
    const s = scores(
      new PrefillWorkScorer("w", { queueWeight: 0.5, requestChars: 256 }),
      context(ws, { text, matched: [0, 900, 1000] }),
    );
    // costs: 1000, 100, 0 + 2000 → max 2000, min 100.
    expect(s[1]).toBe(1);
    expect(s[2]).toBe(0);
    expect(s[0]).toBeCloseTo((2000 - 1000) / 1900, 10);
  });
});

describe("dynamo-cost-scorer (Dynamo scheduler.rs)", () => {
  const scorer = new DynamoCostScorer("d", { overlapScoreWeight: 1, blockChars: 64 });
  it("computes logit = weight × prefill blocks + active blocks", () => {
    // 640-char prompt, 320 held, 128 chars of prefill pending, 1280 active characters.
    // Active blocks add only the request's blocks the worker does not hold (320 of 640).
    expect(scorer.logit(128, 1280, 640, 320)).toBe((128 + 320) / 64 + (1280 + 320) / 64);
    const heavier = new DynamoCostScorer("d", { overlapScoreWeight: 2, blockChars: 64 });
    expect(heavier.logit(0, 0, 640, 0)).toBe(2 * 10 + 10);
  });

  it("scores the lowest logit 1 and the highest 0", () => {
    const text = "z".repeat(640);
    const ws = [worker("held"), worker("cold"), worker("held-busy", { activeChars: 64_000 })];
    const s = scores(scorer, context(ws, { text, matched: [640, 0, 640] }));
    expect(s[0]).toBe(1);
    expect(s[2]).toBe(0);
    expect(s[1]).toBeGreaterThan(0);
  });
});

describe("session-affinity-scorer", () => {
  it("scores the session's worker 1 and the others 0", () => {
    const ctx = context([worker("a"), worker("b")], { text: "t", sessionWorker: "b" });
    expect(scores(new SessionAffinityScorer("s"), ctx)).toEqual([0, 1]);
  });
});

describe("lora-affinity-scorer", () => {
  it("scores 1 where the adapter is loaded, the unknown score where unknown, 0 elsewhere", () => {
    const ws = [
      worker("loaded", { servedModels: new Set(["base", "sql-lora"]) }),
      worker("unknown"),
      worker("other", { servedModels: new Set(["base"]) }),
    ];
    const ctx = context(ws, { text: "t", requested: "sql-lora" });
    expect(scores(new LoraAffinityScorer("l", 0.5), ctx)).toEqual([1, 0.5, 0]);
    const sglang = context(ws, { text: "t", requested: "base", adapter: "sql-lora" });
    expect(scores(new LoraAffinityScorer("l", 0.5), sglang)).toEqual([1, 0.5, 0]);
    expect(scores(new LoraAffinityScorer("l", 0.5), context(ws, { text: "t" }))).toEqual([1, 1, 1]);
  });

  it("a listed adapter its engine holds unloaded scores the load score: a load is a cost", () => {
    const served = new Set(["base", "sql-lora"]);
    const ws = [
      worker("resident", { servedModels: served, loraResident: () => true }),
      worker("unloaded", { servedModels: served, loraResident: () => false }),
      worker("unknown", { servedModels: served, loraResident: () => undefined }),
    ];
    const ctx = context(ws, { text: "t", requested: "sql-lora" });
    expect(scores(new LoraAffinityScorer("l", 0.5, 0.25), ctx)).toEqual([1, 0.25, 1]);
  });
});
