import { afterEach, describe, expect, it } from "vitest";
import { FleetCapacity } from "../../src/admission/fleet-capacity.js";
import { ApproximateIndex } from "../../src/index/approximate-index.js";
import { followWorkers } from "../../src/index/follow-workers.js";
import { WorkerRegistry } from "../../src/workers/registry.js";

const registries: WorkerRegistry[] = [];
afterEach(async () => {
  for (const r of registries.splice(0)) await r.close();
});

function fleet(workers: number) {
  const registry = new WorkerRegistry({
    breaker: { failureThreshold: 5, openMs: 1000, successThreshold: 1 },
    connectTimeoutMs: 1000,
  });
  registries.push(registry);
  const index = new ApproximateIndex();
  followWorkers(index, registry);
  for (let i = 0; i < workers; i++) registry.add(`http://127.0.0.1:${41000 + i}`);
  let now = 1_000_000;
  const capacity = new FleetCapacity(
    registry,
    index,
    {
      pollMs: 1000,
      targetUtilization: 0.8,
      cooldownMs: 10_000,
      prefillTokensPerSec: 1000,
      defaultSlots: 8,
    },
    () => now,
  );
  return {
    registry,
    index,
    capacity,
    /** One poll interval in which `tokens` uncached tokens were prefilled. */
    poll(tokens: number) {
      now += 1000;
      capacity.noteUncached(undefined, tokens);
      return capacity.sample();
    },
  };
}

describe("FleetCapacity", () => {
  it("desired workers follows a prefill ramp up at once and falls only after the cool-down", () => {
    const f = fleet(2);
    // 2 workers x 1000 tokens/s: 1200 tokens/s is 0.6, under the 0.8 target.
    expect(f.poll(1200).desired.get("*")?.desired).toBe(2);
    const saturated = f.poll(3200); // 1.6 of capacity
    expect(saturated.prefill.ratio).toBeCloseTo(1.6);
    expect(saturated.desired.get("*")?.desired).toBe(4);
    expect(saturated.shortOf).toBe("compute");
    // Load gone: the desired count holds for the cool-down (10 polls), then falls.
    const held: number[] = [];
    for (let i = 0; i < 12; i++) held.push(f.poll(0).desired.get("*")!.desired);
    expect(held.slice(0, 8)).toEqual(Array(8).fill(4));
    expect(held.at(-1)).toBe(1);
  });

  it("counts running slots against the engines' batch sizes", () => {
    const f = fleet(2);
    const [a, b] = f.registry.list();
    a!.signals.maxRunning = 4;
    for (let i = 0; i < 6; i++) a!.dispatch({ textChars: 10, uncachedChars: 10 });
    // a: 6 in flight of 4; b: 0 of the default 8 → 6 / 12.
    const r = f.poll(0);
    expect(r.slots).toMatchObject({ demand: 6, capacity: 12 });
    expect(r.slots.ratio).toBeCloseTo(0.5);
    expect(b).toBeDefined();
  });

  it("tells a fleet short of cache from one short of compute", () => {
    const f = fleet(2);
    for (const w of f.registry.list()) w.signals.recordCapacity(100, "metrics", Date.now());
    // 2 x 100 tokens x 4 = 800 characters of KV; the index holds 1000 and evicted more.
    const [a] = f.registry.list();
    f.index.insert(a!.id, undefined, "x".repeat(1000));
    f.capacity.noteEvicted(500);
    const r = f.poll(100);
    expect(r.cache.ratio).toBeCloseTo(1500 / 800);
    expect(r.shortOf).toBe("cache");
  });

  it("advises draining the worker whose cache served the least", () => {
    const f = fleet(3);
    const [a, b, c] = f.registry.list();
    f.index.insert(a!.id, undefined, "held by a");
    const order = f.capacity.drainOrder(
      new Map([
        [a!.id, 10],
        [b!.id, 500],
        [c!.id, 200],
      ]),
    );
    expect(order.map((o) => o.id)).toEqual([a!.id, c!.id, b!.id]);
  });
});
