import { describe, expect, it } from "vitest";
import { ApproximateIndex } from "../../src/index/approximate-index.js";
import {
  FALLBACK_TREE_BUDGET,
  learnedTreeBudget,
  TreeBudgets,
} from "../../src/workers/tree-budget.js";
import { Worker } from "../../src/workers/worker.js";

function worker(id = "w1"): Worker {
  return new Worker(id, "http://127.0.0.1:1", {
    breaker: { failureThreshold: 5, openMs: 1000, successThreshold: 1 },
    connectTimeoutMs: 1000,
  });
}

function setUp(setting: number | "auto", factor = 1) {
  const index = new ApproximateIndex(setting === "auto" ? {} : { maxTreeSize: setting });
  const budgets = new TreeBudgets(index, setting, factor);
  const w = worker();
  index.addWorker(w.id);
  budgets.added(w);
  return { index, budgets, w, tree: index.treeOf(w.id)! };
}

describe("learnedTreeBudget", () => {
  it("is capacity x characters per token x factor", () => {
    expect(learnedTreeBudget(1000, 4, 1)).toBe(4000);
    expect(learnedTreeBudget(1000, 3.5, 0.5)).toBe(1750);
  });

  it("falls back to 4 characters per token when the figure is unusable, and is at least 1", () => {
    expect(learnedTreeBudget(1000, Number.NaN, 1)).toBe(4000);
    expect(learnedTreeBudget(1000, 0, 1)).toBe(4000);
    expect(learnedTreeBudget(0.01, 4, 0.01)).toBe(1);
  });
});

describe("TreeBudgets", () => {
  it("auto: 2^26 until a capacity is known", () => {
    const { budgets, w, tree } = setUp("auto");
    expect(budgets.update(w)).toBe(0);
    expect(w.treeBudget).toBe(FALLBACK_TREE_BUDGET);
    expect(tree.maxChars).toBe(FALLBACK_TREE_BUDGET);
  });

  it("auto: capacity x chars per token x factor, evicting down at once and re-evaluated", () => {
    const { budgets, w, tree } = setUp("auto", 0.5);
    for (let i = 0; i < 100; i++) tree.insert(`tenant-${i}:${"x".repeat(90)}`);
    expect(tree.charCount).toBeGreaterThan(1000);
    w.signals.recordCapacity(500, "get_server_info", Date.now());
    expect(budgets.update(w)).toBeGreaterThan(0);
    expect(w.treeBudget).toBe(1000);
    expect(tree.charCount).toBeLessThanOrEqual(1000);
    w.charsPerTokenEstimate.observe(300, 100); // 3 characters per token
    budgets.update(w);
    expect(w.treeBudget).toBe(750);
    expect(tree.maxChars).toBe(750);
  });

  it("auto: a learned budget is kept on every insert, with no 10% overshoot", () => {
    const { budgets, w, tree } = setUp("auto");
    w.signals.recordCapacity(250, "metrics", Date.now());
    budgets.update(w);
    for (let i = 0; i < 200; i++) {
      tree.insert(`conversation ${i} ${"y".repeat(i % 37)}`);
      expect(tree.charCount).toBeLessThanOrEqual(1000);
    }
  });

  it("a fixed --max-tree-size ignores the engine's capacity", () => {
    const { budgets, w, tree } = setUp(5000);
    w.signals.recordCapacity(10, "get_server_info", Date.now());
    expect(budgets.update(w)).toBe(0);
    expect(w.treeBudget).toBe(5000);
    expect(tree.maxChars).toBe(5000);
  });
});

describe("TreeBudgets: hysteresis (issue 27)", () => {
  it("leaves a learned budget alone while characters per token drift by 2% or less", () => {
    const { budgets, w, tree } = setUp("auto");
    w.signals.recordCapacity(1000, "get_server_info", Date.now());
    budgets.update(w);
    expect(w.treeBudget).toBe(4000);
    for (let i = 0; i < 40; i++) tree.insert(`prompt ${i} ${"z".repeat(90)}`);
    const held = tree.charCount;
    // 3.95 characters per token: a budget of 3950, 1.25% below; nothing is evicted for it.
    w.charsPerTokenEstimate.observe(395, 100);
    expect(budgets.update(w)).toBe(0);
    expect(w.treeBudget).toBe(4000);
    expect(tree.charCount).toBe(held);
    // 3.5: 12.5% below, applied at once.
    for (let i = 0; i < 200; i++) w.charsPerTokenEstimate.observe(350, 100);
    budgets.update(w);
    expect(w.treeBudget).toBe(Math.floor(1000 * w.charsPerToken));
    expect(w.treeBudget).toBeLessThan(3600);
  });

  it("follows any change of capacity at once", () => {
    const { budgets, w } = setUp("auto");
    w.signals.recordCapacity(1000, "get_server_info", Date.now());
    budgets.update(w);
    w.signals.recordCapacity(990, "get_server_info", Date.now());
    budgets.update(w);
    expect(w.treeBudget).toBe(3960);
  });
});
