import { describe, expect, it } from "vitest";
import {
  AvailableFilter,
  ModelServedFilter,
  SaturationFilter,
} from "../../src/scheduling/filters.js";
import { QueueScorer } from "../../src/scheduling/load-scorers.js";
import {
  MaxScorePicker,
  SoftmaxPicker,
  WeightedRandomPicker,
} from "../../src/scheduling/pickers.js";
import { SchedulerProfile } from "../../src/scheduling/profile.js";
import { context, replay, worker } from "./helpers.js";

const saturation = () =>
  new SaturationFilter("sat", { queueDepthThreshold: 5, kvCacheUtilThreshold: 0.8 });

describe("filters", () => {
  it("saturation-filter drops a worker whose engine queue or KV usage is at the threshold", () => {
    const f = saturation();
    const ctx = context([]);
    expect(f.admits(worker("q", { engine: { queued: 5, running: 0, kvUsage: 0.1 } }), ctx)).toBe(
      false,
    );
    expect(f.admits(worker("kv", { engine: { queued: 0, running: 0, kvUsage: 0.8 } }), ctx)).toBe(
      false,
    );
    expect(f.admits(worker("ok", { engine: { queued: 4, running: 9, kvUsage: 0.79 } }), ctx)).toBe(
      true,
    );
    expect(f.admits(worker("unknown"), ctx)).toBe(true);
  });

  it("saturation-filter fails open in a profile: when every worker is saturated none is dropped", () => {
    const full = { queued: 50, running: 0, kvUsage: 0.99 };
    const profile = new SchedulerProfile("p", {
      filters: [saturation()],
      scorers: [],
      picker: new MaxScorePicker("max"),
    });
    const ws = [worker("a", { engine: full }), worker("b", { engine: full })];
    expect(profile.select(ws, { text: "t" })).toBeDefined();
    const explained = profile.explain(ws, { text: "t" });
    expect(explained.failedOpen).toEqual(["sat"]);
    expect(explained.candidates.every((c) => c.filteredBy === null)).toBe(true);
    // One unsaturated worker: the saturated one is filtered, and named as such.
    const mixed = [worker("a", { engine: full }), worker("b")];
    expect(profile.select(mixed, { text: "t" })!.worker.id).toBe("b");
    expect(profile.explain(mixed, { text: "t" }).candidates[0]!.filteredBy).toBe("sat");
  });

  it("model-filter keeps workers listing the model, its SGLang base, or an unknown list", () => {
    const f = new ModelServedFilter("model");
    const ctx = context([], { text: "t", requested: "llama:sql" });
    expect(f.admits(worker("base", { servedModels: new Set(["llama"]) }), ctx)).toBe(true);
    expect(f.admits(worker("other", { servedModels: new Set(["qwen"]) }), ctx)).toBe(false);
    expect(f.admits(worker("unknown"), ctx)).toBe(true);
  });

  it("health-filter drops unavailable workers, and a profile with only those gives undefined", () => {
    const profile = new SchedulerProfile("p", {
      filters: [new AvailableFilter("health")],
      scorers: [],
      picker: new MaxScorePicker("max"),
    });
    const ws = [worker("down", { available: false }), worker("up")];
    expect(profile.select(ws, { text: "t" })!.worker.id).toBe("up");
    expect(profile.select([worker("down", { available: false })], { text: "t" })).toBeUndefined();
  });
});

describe("pickers", () => {
  it("max-score takes the highest total and rotates among ties", () => {
    const picker = new MaxScorePicker("max");
    const ctx = context([worker("a"), worker("b"), worker("c")]);
    const totals = Float64Array.from([0.5, 2, 2]);
    const picks = [0, 1, 2, 3].map(() => picker.pick(ctx, totals));
    expect(picks.map((p) => (p === -1 ? -1 : p.index))).toEqual([1, 1, 2, 1]);
    expect(picks.every((p) => p !== -1 && p.branch === "max_score_tie")).toBe(true);
    expect(picker.pick(ctx, Float64Array.from([0, 3, 1]))).toMatchObject({
      index: 1,
      branch: "max_score",
    });
  });

  it("weighted-random draws in proportion to the scores", () => {
    const ctx = context([worker("a"), worker("b"), worker("c")]);
    const totals = Float64Array.from([1, 0, 3]);
    // Cumulative weights 1, 1, 4 of 4: r < 0.25 → a; otherwise c (b has weight 0).
    const draws = [0, 0.2, 0.25, 0.99].map(
      (r) => (new WeightedRandomPicker("w", () => r).pick(ctx, totals) as { index: number }).index,
    );
    expect(draws).toEqual([0, 0, 2, 2]);
  });

  it("weighted-random is uniform when every score is 0, and never picks a filtered worker", () => {
    const ctx = context([worker("a"), worker("b"), worker("c")]);
    ctx.alive[1] = 0;
    const picker = new WeightedRandomPicker("w", replay(0, 0.6));
    const zero = new Float64Array(3);
    expect(
      [picker.pick(ctx, zero), picker.pick(ctx, zero)].map((p) => (p as { index: number }).index),
    ).toEqual([0, 2]);
  });

  it("softmax at temperature 0 is the max-score picker", () => {
    const ctx = context([worker("a"), worker("b")]);
    const picker = new SoftmaxPicker("s", 0, () => 0.99);
    expect(picker.pick(ctx, Float64Array.from([0.2, 0.9]))).toMatchObject({
      index: 1,
      branch: "max_score",
    });
  });

  it("softmax draws with p ∝ exp(score / T), as Dynamo's softmax_sample", () => {
    const ctx = context([worker("a"), worker("b")]);
    const totals = Float64Array.from([0, 1]);
    const t = 0.5;
    const pA = Math.exp(-1 / t) / (Math.exp(-1 / t) + 1);
    const at = (r: number) =>
      (new SoftmaxPicker("s", t, () => r).pick(ctx, totals) as { index: number }).index;
    expect(at(pA - 1e-9)).toBe(0);
    expect(at(pA + 1e-9)).toBe(1);
  });

  it("a profile explains every scorer's score and weight per candidate", () => {
    const profile = new SchedulerProfile("p", {
      filters: [],
      scorers: [{ scorer: new QueueScorer("queue"), weight: 2 }],
      picker: new MaxScorePicker("max"),
    });
    const ws = [worker("a", { pendingPrefillRequests: 2 }), worker("b")];
    const explained = profile.explain(ws, { text: "t" });
    expect(explained.candidates.map((c) => c.scores)).toEqual([
      { queue: { score: 0, weight: 2 } },
      { queue: { score: 1, weight: 2 } },
    ]);
    expect(explained.candidates.map((c) => c.total)).toEqual([0, 2]);
    expect(profile.select(ws, { text: "t" })!.worker.id).toBe("b");
  });
});
