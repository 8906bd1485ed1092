import { describe, expect, it } from "vitest";
import { ApproximateIndex } from "../../src/index/approximate-index.js";
import type { PrefixIndex } from "../../src/index/prefix-index.js";
import { describePrefixIndex } from "./prefix-index.conformance.js";

describePrefixIndex("ApproximateIndex", {
  make: (options) => new ApproximateIndex(options),
  check(index: PrefixIndex) {
    const approx = index as ApproximateIndex;
    for (const tree of approx.evictionUnits()) {
      const t = tree as unknown as { recount(): { chars: number }; charCount: number };
      if (t.recount().chars !== t.charCount) throw new Error("tree counters wrong");
    }
  },
});

describe("ApproximateIndex.fill", () => {
  it("is unknown until the engine's capacity sets a budget, then the share of it held", () => {
    const index = new ApproximateIndex({ maxTreeSize: 1000 });
    index.addWorker("w");
    index.insert("w", undefined, "x".repeat(100));
    expect(index.fill("w")).toBeUndefined();
    index.setBudget("w", 400);
    expect(index.fill("w")).toBeCloseTo(0.25, 12);
    index.insert("w", undefined, "y".repeat(300));
    expect(index.fill("w")).toBe(1);
    expect(index.fill("nobody")).toBeUndefined();
    index.removeWorker("w");
    index.addWorker("w");
    expect(index.fill("w")).toBeUndefined();
  });
});
