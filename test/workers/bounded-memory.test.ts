import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { describe, expect, it } from "vitest";
import { ApproximateIndex } from "../../src/index/approximate-index.js";
import { followMembership } from "../../src/index/membership.js";
import { createPolicy } from "../../src/scheduling/builtin-profiles.js";
import { Scheduler } from "../../src/scheduling/scheduler.js";
import { WorkerRegistry } from "../../src/workers/registry.js";

setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

function heapAfterGc(): number {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
}

describe("bounded memory", () => {
  it("routing 1M distinct prompts keeps every tree within its budget and the heap bounded", async () => {
    const budget = 1_000_000;
    let evicted = 0;
    const index = new ApproximateIndex({
      maxTreeSize: budget,
      onEvict: (chars) => {
        evicted += chars;
      },
    });
    const registry = new WorkerRegistry({
      breaker: { failureThreshold: 5, openMs: 30_000, successThreshold: 2 },
      connectTimeoutMs: 1000,
    });
    followMembership(index, registry);
    for (let i = 0; i < 4; i++) registry.add(`http://127.0.0.1:${40000 + i}`);
    const decider = new Scheduler(createPolicy("cache_aware"), index);
    const candidates = registry.candidates();
    const system = "You are a helpful assistant. Answer briefly and precisely. ";
    let routed = 0;
    let maxSeen = 0;
    let heapAt100k = 0;
    for (let i = 0; i < 1_000_000; i++) {
      // Distinct prompts, a quarter of them behind a shared system prompt.
      const text = `${i % 4 === 0 ? system : ""}request ${i} ${(i * 2654435761) % 4294967296} about topic ${i % 997}`;
      const decision = decider.decide(candidates, { text });
      if (decision) routed += 1;
      if (i % 1000 === 0) {
        for (const w of candidates) maxSeen = Math.max(maxSeen, index.size(w.id));
      }
      if (i === 100_000) heapAt100k = heapAfterGc();
    }
    const heapAt1M = heapAfterGc();
    expect(routed).toBe(1_000_000);
    // Reactive eviction keeps each tree under the high-water mark (110%) at all times...
    expect(maxSeen).toBeLessThanOrEqual(budget * 1.1);
    // ...and an eviction pass brings it back within the budget.
    for (const w of candidates) {
      const tree = index.treeOf(w.id)!;
      tree.evict();
      expect(tree.charCount).toBeLessThanOrEqual(budget);
      expect(tree.recount().chars).toBe(tree.charCount);
    }
    expect(evicted).toBeGreaterThan(10_000_000);
    // Ten times more prompts after the 100k mark, and the heap did not grow with them.
    expect(heapAt1M - heapAt100k).toBeLessThan(32 * 1024 * 1024);
    await registry.close();
  }, 120_000);
});
