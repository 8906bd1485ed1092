import { afterEach, describe, expect, it, vi } from "vitest";
import { startEvictionTimer } from "../../src/tree/eviction-timer.js";
import { RadixTree } from "../../src/tree/radix-tree.js";

/** A tree over its budget (the high-water mark is set out of reach so only evict() trims it). */
function overBudgetTree(onEvict?: (n: number) => void): RadixTree {
  const tree = new RadixTree({ maxChars: 10, highWaterRatio: 100, onEvict });
  for (let i = 0; i < 5; i++) tree.insert(`${String.fromCharCode(97 + i)}-padding`);
  return tree;
}

/** Lets a started sweep finish: each further tree is evicted on its own later turn. */
function finishSweep(trees: number): void {
  for (let i = 1; i < trees; i++) vi.advanceTimersByTime(1);
}

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

describe("startEvictionTimer", () => {
  it("calls evict on every tree once per interval", () => {
    vi.useFakeTimers();
    const trees = [overBudgetTree(), overBudgetTree()];
    const spies = trees.map((t) => vi.spyOn(t, "evict"));
    const timer = startEvictionTimer(() => trees, 5000);
    vi.advanceTimersByTime(4999);
    for (const spy of spies) expect(spy).not.toHaveBeenCalled();
    vi.advanceTimersByTime(1);
    finishSweep(trees.length);
    for (const spy of spies) expect(spy).toHaveBeenCalledTimes(1);
    for (const tree of trees) expect(tree.charCount).toBeLessThanOrEqual(10);
    vi.advanceTimersByTime(10_000);
    for (const spy of spies) expect(spy).toHaveBeenCalledTimes(3);
    timer.stop();
  });

  it("asks for the trees afresh on every tick", () => {
    vi.useFakeTimers();
    const trees: RadixTree[] = [];
    const getTrees = vi.fn(() => trees);
    const timer = startEvictionTimer(getTrees, 1000);
    vi.advanceTimersByTime(1000);
    const late = overBudgetTree();
    trees.push(late);
    vi.advanceTimersByTime(1000);
    expect(getTrees).toHaveBeenCalledTimes(2);
    expect(late.charCount).toBeLessThanOrEqual(10);
    timer.stop();
  });

  it("interval 0 starts no timer, and its stop() is a no-op", () => {
    vi.useFakeTimers();
    const getTrees = vi.fn(() => [overBudgetTree()]);
    const timer = startEvictionTimer(getTrees, 0);
    expect(vi.getTimerCount()).toBe(0);
    vi.advanceTimersByTime(60_000);
    expect(getTrees).not.toHaveBeenCalled();
    expect(() => timer.stop()).not.toThrow();
  });

  it("stop() stops further evictions", () => {
    vi.useFakeTimers();
    const tree = overBudgetTree();
    const spy = vi.spyOn(tree, "evict");
    const timer = startEvictionTimer(() => [tree], 2000);
    vi.advanceTimersByTime(2000);
    timer.stop();
    expect(vi.getTimerCount()).toBe(0);
    vi.advanceTimersByTime(20_000);
    expect(spy).toHaveBeenCalledTimes(1);
  });

  it("unrefs its interval and the sweep's steps so they never keep the process alive", async () => {
    const setIntervalSpy = vi.spyOn(globalThis, "setInterval");
    const setImmediateSpy = vi.spyOn(globalThis, "setImmediate");
    const tree = overBudgetTree();
    const timer = startEvictionTimer(() => [tree], 1);
    const interval = setIntervalSpy.mock.results[0]?.value as NodeJS.Timeout;
    expect(interval.hasRef()).toBe(false);
    await vi.waitFor(() => expect(setImmediateSpy).toHaveBeenCalled());
    const step = setImmediateSpy.mock.results[0]?.value as NodeJS.Immediate;
    expect(step.hasRef()).toBe(false);
    timer.stop();
  });

  it("evicts one tree per turn of the event loop", () => {
    vi.useFakeTimers();
    const trees = [overBudgetTree(), overBudgetTree(), overBudgetTree()];
    const spies = trees.map((t) => vi.spyOn(t, "evict"));
    const timer = startEvictionTimer(() => trees, 1000);
    vi.advanceTimersToNextTimer(); // the interval: first tree only
    expect(spies.map((s) => s.mock.calls.length)).toEqual([1, 0, 0]);
    vi.advanceTimersToNextTimer(); // next turn: second tree
    expect(spies.map((s) => s.mock.calls.length)).toEqual([1, 1, 0]);
    vi.advanceTimersToNextTimer();
    expect(spies.map((s) => s.mock.calls.length)).toEqual([1, 1, 1]);
    timer.stop();
  });

  it("stop() cancels a sweep in progress", () => {
    vi.useFakeTimers();
    const trees = [overBudgetTree(), overBudgetTree()];
    const spies = trees.map((t) => vi.spyOn(t, "evict"));
    const timer = startEvictionTimer(() => trees, 1000);
    vi.advanceTimersToNextTimer();
    timer.stop();
    expect(vi.getTimerCount()).toBe(0);
    vi.advanceTimersByTime(10_000);
    expect(spies.map((s) => s.mock.calls.length)).toEqual([1, 0]);
  });

  it("reports each eviction through the tree's onEvict", () => {
    vi.useFakeTimers();
    const reports: number[] = [];
    const tree = overBudgetTree((n) => reports.push(n));
    const timer = startEvictionTimer(() => [tree], 1000);
    vi.advanceTimersByTime(3000);
    expect(reports).toHaveLength(1); // later ticks find the tree within budget
    expect(reports[0]).toBe(45 - tree.charCount);
    timer.stop();
  });

  it("keeps sweeping the other trees when one throws, handing the error to onError", () => {
    vi.useFakeTimers();
    const bad = overBudgetTree(() => {
      throw new Error("hook failed");
    });
    const good = overBudgetTree();
    const errors: unknown[] = [];
    const timer = startEvictionTimer(
      () => [bad, good],
      1000,
      (e) => errors.push(e),
    );
    vi.advanceTimersByTime(1000);
    finishSweep(2);
    expect(errors).toHaveLength(1);
    expect(good.charCount).toBeLessThanOrEqual(10);
    timer.stop();
  });

  it("without onError, throws the error from that tree's turn and still sweeps the rest", () => {
    vi.useFakeTimers();
    const bad = overBudgetTree(() => {
      throw new Error("hook failed");
    });
    const good = overBudgetTree();
    const timer = startEvictionTimer(() => [bad, good], 1000);
    expect(() => vi.advanceTimersToNextTimer()).toThrow("hook failed");
    vi.advanceTimersToNextTimer();
    expect(good.charCount).toBeLessThanOrEqual(10);
    timer.stop();
  });

  it.each([-1, Number.NaN, Number.POSITIVE_INFINITY, 3_000_000_000])(
    "rejects interval %s with a RangeError",
    (ms) => {
      expect(() => startEvictionTimer(() => [], ms)).toThrow(RangeError);
    },
  );
});
