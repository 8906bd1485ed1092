import { describe, expect, it } from "vitest";
import type { PrefixIndex } from "../../src/index/prefix-index.js";
import { SharedIndex } from "../../src/index/shared-index.js";
import { describePrefixIndex } from "./prefix-index.conformance.js";

describePrefixIndex("SharedIndex", {
  // Tiny slices, so that the suite's evictions go through many of them.
  make: (options) => new SharedIndex({ ...options, sliceChars: 7 }),
  check: (index: PrefixIndex) => (index as SharedIndex).check(),
});

function matched(index: SharedIndex, text: string, ids: string[], model?: string): number[] {
  const out: number[] = [];
  index.match(
    text,
    model,
    ids.map((id) => ({ id })),
    out,
  );
  return out;
}

describe("SharedIndex", () => {
  it("stores a prefix routed to several workers once, with one claim per worker", () => {
    const index = new SharedIndex();
    for (const id of ["a", "b", "c"]) index.addWorker(id);
    const system = "You are a helpful assistant. ".repeat(20);
    index.insert("a", undefined, `${system}question one`);
    index.insert("b", undefined, `${system}question two`);
    index.insert("c", undefined, `${system}question six`);
    // One node for the shared prefix (split where the questions diverge), one per question tail.
    expect(index.nodeCount).toBe(4);
    expect(index.charCount).toBe(
      `${system}question `.length + "one".length + "two".length + "six".length,
    );
    expect(matched(index, `${system}question two, again`, ["a", "b", "c"])).toEqual([
      `${system}question `.length,
      `${system}question two`.length,
      `${system}question `.length,
    ]);
    index.check();
  });

  it("drops a model's tree once nothing is left in it (model names come from clients)", () => {
    const index = new SharedIndex({ maxTreeSize: 100 });
    index.addWorker("a");
    for (let i = 0; i < 50; i++) index.insert("a", `model-${i}`, `prompt number ${i}`);
    for (const unit of index.evictionUnits()) unit.evict();
    index.removeWorker("a");
    expect(index.nodeCount).toBe(0);
    expect(index.charCount).toBe(0);
    index.check();
  });

  it("evicting one worker's claim leaves the node to the workers that still hold it", () => {
    const index = new SharedIndex({ maxTreeSize: 1000 });
    index.addWorker("a");
    index.addWorker("b");
    const old = "o".repeat(300);
    index.insert("a", undefined, old);
    index.insert("b", undefined, old);
    index.insert("a", undefined, "n".repeat(600));
    // a is over budget: its oldest leaf (its claim on `old`) goes, b's claim stays.
    expect(index.setBudget("a", 600)).toBe(300);
    expect(matched(index, old, ["a", "b"])).toEqual([0, 300]);
    expect(index.nodeCount).toBe(2);
    index.check();
  });

  it("truncating one worker splits the shared edge: the others keep all of it", () => {
    const index = new SharedIndex();
    index.addWorker("a");
    index.addWorker("b");
    const text = "abcdefghij".repeat(10);
    index.insert("a", undefined, text);
    index.insert("b", undefined, text);
    expect(index.truncate("a", undefined, text, 40)).toBe(60);
    expect(matched(index, text, ["a", "b"])).toEqual([40, 100]);
    expect(index.size("a")).toBe(40);
    expect(index.size("b")).toBe(100);
    index.check();
  });

  it("evicts a worker far over budget in slices, one eviction unit per slice", () => {
    // No reactive eviction below 100x the budget: only the sweep brings the worker back.
    const index = new SharedIndex({ maxTreeSize: 10_000, sliceChars: 1000, highWaterRatio: 100 });
    index.addWorker("a");
    index.addWorker("b");
    for (let i = 0; i < 160; i++) index.insert("a", undefined, `${i} ${"x".repeat(95)}`);
    index.insert("b", undefined, "small");
    expect(index.size("a")).toBeGreaterThan(15_000);
    const excess = index.size("a") - 10_000;
    const slices = [...index.evictionUnits()];
    expect(slices).toHaveLength(Math.ceil(excess / 1000));
    for (const slice of slices) {
      const evicted = slice.evict();
      expect(evicted).toBeGreaterThan(0);
      // A slice stops at the first leaf that takes it to 1000 characters or more.
      expect(evicted).toBeLessThan(1000 + 100);
    }
    expect(index.size("a")).toBeLessThanOrEqual(10_000);
    expect(index.size("b")).toBe(5);
    expect([...index.evictionUnits()]).toHaveLength(0);
    index.check();
  });

  it("refuses a slice size or high-water ratio out of range", () => {
    expect(() => new SharedIndex({ sliceChars: 0 })).toThrow(/sliceChars/);
    expect(() => new SharedIndex({ maxTreeSize: 0 })).toThrow(/budget/);
    expect(() => new SharedIndex({ highWaterRatio: 0.5 })).toThrow(/highWaterRatio/);
  });
});
