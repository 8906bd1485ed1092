import { describe, expect, it, vi } from "vitest";
import { ApproximateIndex } from "../../src/index/approximate-index.js";
import type { PrefixIndex } from "../../src/index/prefix-index.js";
import { SharedIndex } from "../../src/index/shared-index.js";
import { RadixTree } from "../../src/tree/radix-tree.js";

/**
 * Both character trees, once a budget is the engine's capacity (setBudget), keep the picture of a
 * block-LRU engine's cache: eviction takes the oldest conversation's end first, and the room the
 * running requests take (reserve) is not claimed for prefixes.
 */
type Make = (options?: { maxTreeSize?: number }) => PrefixIndex;
const TREES: [string, Make, (index: PrefixIndex) => void][] = [
  ["ApproximateIndex", (options) => new ApproximateIndex(options), () => {}],
  [
    "SharedIndex",
    (options) => new SharedIndex({ ...options, sliceChars: 7 }),
    (index) => (index as SharedIndex).check(),
  ],
];

const preamble = "tools: ".repeat(10);
const tenantA = `${preamble}A system prompt ${"a".repeat(60)}`;
const tenantB = `${preamble}B system prompt ${"b".repeat(60)}`;
const tenantC = `${preamble}C system prompt ${"c".repeat(60)}`;

function held(index: PrefixIndex, text: string, ids: string[]): number[] {
  const out: number[] = [];
  index.match(
    text,
    undefined,
    ids.map((id) => ({ id })),
    out,
  );
  return out;
}

describe.each(TREES)("%s: the picture of a block-LRU engine", (_name, make, check) => {
  it("evicts only the excess, off the end of the oldest conversation", () => {
    const index = make();
    index.addWorker("w");
    index.setBudget("w", tenantA.length + tenantB.length - preamble.length);
    index.insert("w", undefined, tenantA);
    index.insert("w", undefined, tenantB);
    // C's own part is 76 characters: A loses that many off its end, and keeps its prompt's start.
    index.insert("w", undefined, tenantC);
    const own = tenantC.length - preamble.length;
    expect(held(index, tenantA, ["w"])).toEqual([tenantA.length - own]);
    expect(held(index, tenantB, ["w"])).toEqual([tenantB.length]);
    expect(held(index, tenantC, ["w"])).toEqual([tenantC.length]);
    check(index);
  });

  it("evicts whole leaves while the budget is not an engine's (no setBudget)", () => {
    const index = make({ maxTreeSize: 200 });
    index.addWorker("w");
    index.insert("w", undefined, tenantA);
    index.insert("w", undefined, tenantB);
    index.insert("w", undefined, tenantC);
    for (const unit of index.evictionUnits()) unit.evict();
    expect(held(index, tenantA, ["w"])).toEqual([preamble.length]);
    check(index);
  });

  it("keeps its budget less the reserve of the running requests, and gives the room back", () => {
    const index = make();
    index.addWorker("w");
    index.addWorker("v");
    index.setBudget("w", 1000);
    index.setBudget("v", 1000);
    for (let i = 0; i < 40; i++) {
      index.insert("w", undefined, `conversation ${i} ${"y".repeat(40)}`);
      index.insert("v", undefined, `conversation ${i} ${"y".repeat(40)}`);
    }
    expect(index.size("w")).toBeGreaterThan(950);
    const before = index.size("w");
    const evicted = index.reserve!("w", 300);
    expect(evicted).toBe(before - index.size("w"));
    expect(index.size("w")).toBeLessThanOrEqual(700);
    expect(index.fill!("w")).toBeGreaterThan(0.95);
    // Another worker's entry is not touched.
    expect(index.size("v")).toBe(before);
    // Inserts keep it there while the requests run.
    index.insert("w", undefined, `conversation new ${"z".repeat(80)}`);
    expect(index.size("w")).toBeLessThanOrEqual(700);
    // A new capacity keeps the reserve.
    index.setBudget("w", 900);
    expect(index.size("w")).toBeLessThanOrEqual(600);
    // They finished: the room is the budget's again.
    expect(index.reserve!("w", 0)).toBe(0);
    for (let i = 0; i < 10; i++) index.insert("w", undefined, `later ${i} ${"q".repeat(40)}`);
    expect(index.size("w")).toBeGreaterThan(850);
    expect(index.size("w")).toBeLessThanOrEqual(900);
    check(index);
  });

  it("does no work for a reserve that did not change (asked per candidate per decision)", () => {
    const index = make();
    index.addWorker("w");
    index.setBudget("w", 1000);
    for (let i = 0; i < 40; i++)
      index.insert("w", undefined, `conversation ${i} ${"y".repeat(40)}`);
    index.reserve!("w", 300);
    const size = index.size("w");
    // What applies a budget: the tree's for the per-worker trees, the worker's for the shared one.
    const applied =
      index instanceof SharedIndex
        ? vi.spyOn(index as unknown as { keepBeside(w: unknown): number }, "keepBeside")
        : vi.spyOn(RadixTree.prototype, "setMaxChars");
    try {
      for (let i = 0; i < 5; i++) expect(index.reserve!("w", 300)).toBe(0);
      expect(applied).not.toHaveBeenCalled();
      expect(index.size("w")).toBe(size);
      // A change still applies at once.
      expect(index.reserve!("w", 400)).toBeGreaterThan(0);
      expect(applied).toHaveBeenCalledTimes(1);
    } finally {
      applied.mockRestore();
    }
    check(index);
  });

  it("never reserves more than half a budget, nor on an unknown or unbudgeted worker", () => {
    const index = make();
    index.addWorker("w");
    index.addWorker("u");
    index.setBudget("w", 1000);
    for (let i = 0; i < 40; i++)
      index.insert("w", undefined, `conversation ${i} ${"y".repeat(40)}`);
    index.reserve!("w", 10_000);
    expect(index.size("w")).toBeGreaterThanOrEqual(490);
    expect(index.size("w")).toBeLessThanOrEqual(500);
    index.insert("u", undefined, tenantA);
    expect(index.reserve!("u", 10_000)).toBe(0);
    expect(index.size("u")).toBe(tenantA.length);
    expect(index.reserve!("nobody", 10)).toBe(0);
    check(index);
  });
});
