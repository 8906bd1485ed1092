import { describe, expect, it } from "vitest";
import { ApproximateIndex } from "../../src/index/approximate-index.js";
import { PrefixIndexPlugin } from "../../src/scheduling/prefix-plugin.js";

const SYSTEM = "You are a helpful assistant. Answer briefly. ";

function setup() {
  const index = new ApproximateIndex();
  const workers = ["a", "b"].map((id) => ({ id, inFlight: 0 }));
  for (const w of workers) index.addWorker(w.id);
  return { index, workers, plugin: new PrefixIndexPlugin(index) };
}

describe("the prefix index as one plugin with request-stage hooks", () => {
  it("match → afterDispatch → match: the dispatched text is what the worker then holds", () => {
    const { workers, plugin } = setup();
    const request = { text: `${SYSTEM}first` };
    const out: number[] = [];
    plugin.match(request, workers, out);
    expect(out).toEqual([0, 0]);
    plugin.afterDispatch("b", request);
    plugin.match({ text: `${SYSTEM}second` }, workers, out);
    expect(out).toEqual([0, SYSTEM.length]);
  });

  it("match keeps room in each candidate's entry for the requests running there", () => {
    const { index, plugin } = setup();
    index.setBudget("a", 2000);
    index.setBudget("b", 2000);
    for (let i = 0; i < 30; i++) {
      plugin.afterDispatch("a", { text: `${SYSTEM}${i} ${"x".repeat(60)}` });
      plugin.afterDispatch("b", { text: `${SYSTEM}${i} ${"x".repeat(60)}` });
    }
    const full = index.size("a");
    expect(full).toBeGreaterThan(1900);
    // Three requests run on a, each holding 100 characters of KV beyond its text; none on b.
    const running = [
      { id: "a", inFlight: 3, runningReserveChars: 100 },
      { id: "b", inFlight: 0, runningReserveChars: 100 },
    ];
    plugin.match({ text: SYSTEM }, running, []);
    expect(index.size("a")).toBeLessThanOrEqual(1700);
    expect(index.size("b")).toBe(full);
    // They finished: the next decision gives the room back.
    running[0] = { id: "a", inFlight: 0, runningReserveChars: 100 };
    plugin.match({ text: SYSTEM }, running, []);
    plugin.afterDispatch("a", { text: `${SYSTEM}new ${"y".repeat(300)}` });
    expect(index.size("a")).toBeGreaterThan(1900);
  });

  it("a worker whose capacity is not learned yet is as full as its peers' budgets say, not empty", () => {
    const index = new ApproximateIndex();
    const workers = ["a", "b", "c"].map((id) => ({ id, inFlight: 0 }));
    for (const w of workers) index.addWorker(w.id);
    const plugin = new PrefixIndexPlugin(index);
    const text = `${SYSTEM}${"z".repeat(455)}`; // 500 characters
    plugin.afterDispatch("a", { text });
    plugin.afterDispatch("b", { text });
    const fill: number[] = [];
    // Nobody's capacity is known: no fill at all, alike for every candidate.
    plugin.match({ text }, workers, [], fill);
    expect(fill).toEqual([0, 0, 0]);
    // a's engine answered first (1000 characters): b, holding as much, counts as full as a.
    index.setBudget("a", 1000);
    plugin.match({ text }, workers, [], fill);
    expect(fill).toEqual([0.5, 0.5, 0]);
    index.setBudget("b", 4000);
    plugin.match({ text }, workers, [], fill);
    expect(fill).toEqual([0.5, 0.125, 0]);
  });

  it("an index that never knows fills (no `fill`) gives every candidate 0, over earlier values", () => {
    const { index, workers } = setup();
    const fillLess = Object.assign(Object.create(Object.getPrototypeOf(index)), index, {
      fill: undefined,
    });
    const plugin = new PrefixIndexPlugin(fillLess);
    const fill = [0.7, 0.3, 0.9];
    plugin.match({ text: SYSTEM }, workers, [], fill);
    expect(fill).toEqual([0, 0]);
  });

  it("rejected takes back what the dispatch claimed, down to what was held before", () => {
    const { workers, plugin } = setup();
    plugin.afterDispatch("a", { text: SYSTEM });
    const request = { text: `${SYSTEM}a long new question` };
    plugin.afterDispatch("a", request);
    plugin.rejected("a", request, SYSTEM.length);
    const out: number[] = [];
    plugin.match(request, workers, out);
    expect(out[0]).toBe(SYSTEM.length);
  });

  it("completed forgets what the engine evicted below its reported hit, keeping this text", () => {
    const { workers, plugin } = setup();
    const request = { text: `${SYSTEM}question` };
    plugin.afterDispatch("a", request);
    // The engine held only 10 characters before this request: the rest it had evicted.
    expect(plugin.completed("a", request, 10)).toBe(0);
    const out: number[] = [];
    plugin.match(request, workers, out);
    expect(out[0]).toBe(request.text.length);
    expect(plugin.sourceOf("a")).toBe("approx");
  });

  it("prepare is a no-op for an index without an asynchronous step", () => {
    const { workers, plugin } = setup();
    expect(plugin.prepare({ text: "x", tokenizeInput: "x" } as never, () => workers)).toBe(
      undefined,
    );
  });
});
