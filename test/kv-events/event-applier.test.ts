import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { KvEvent } from "../../src/index/block-events.js";
import { blockKeys } from "../../src/index/block-keys.js";
import { PreciseIndex } from "../../src/index/precise-index.js";
import { EventApplier, SLICE_BLOCKS } from "../../src/kv-events/event-applier.js";
import { TurnBudget } from "../../src/kv-events/turn-budget.js";

const BS = 2;
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

function stored(hashes: string[], parent: string | null, tokens: number[]): KvEvent {
  return {
    type: "BlockStored",
    blockHashes: hashes,
    parentHash: parent,
    tokenIds: tokens,
    blockSize: BS,
    loraId: null,
    medium: null,
    loraName: null,
  };
}

/** A chain of n blocks named `${name}:i`, tokens i*BS.. distinct per name. */
function chain(name: string, n: number, seed = 0): { event: KvEvent; tokens: number[] } {
  const tokens = Array.from({ length: n * BS }, (_, i) => (i * 31 + seed) % 50_000);
  const hashes = Array.from({ length: n }, (_, i) => `${name}:${i}`);
  return { event: stored(hashes, null, tokens), tokens };
}

/** A budget of 0 ms: one slice per event-loop turn, so each turn's work is visible. */
function setup(maxPendingBlocks = 1_000_000) {
  const index = new PreciseIndex({ maxBlocksPerWorker: 1_000_000, speculativeTtlMs: 1000 });
  index.addWorker("w");
  const firsts: boolean[] = [];
  const applier = new EventApplier({
    budget: new TurnBudget(0),
    maxPendingBlocks,
    apply: (event, first) => {
      firsts.push(first);
      index.apply("w", event);
    },
  });
  return { index, applier, firsts };
}

async function drained(applier: EventApplier): Promise<void> {
  for (let i = 0; applier.pendingBlocks > 0; i++) {
    if (i > 10_000) throw new Error("never drained");
    await nextTurn();
  }
}

describe("EventApplier", () => {
  // Issue 20: one batch of 400k blocks was applied in one go and stalled /health for 6.6 s.
  it("applies one big BlockStored in slices over several turns, to the state applying it whole gives", async () => {
    const { index, applier, firsts } = setup();
    const n = 10 * SLICE_BLOCKS + 7;
    const { event, tokens } = chain("big", n);
    expect(applier.push([event])).toBe(true);
    await nextTurn();
    expect(index.blockCount("w")).toBeGreaterThan(0);
    expect(index.blockCount("w")).toBeLessThanOrEqual(2 * SLICE_BLOCKS);
    await drained(applier);
    expect(index.blockCount("w")).toBe(n);
    expect(index.matchBlocks("w", blockKeys(tokens, BS, ""))).toBe(n);
    // Eleven pieces, the first marked as such (an event counts once in the metrics).
    expect(firsts).toEqual([true, ...Array(10).fill(false)]);
  });

  it("refuses a batch that would pass its bound, but always takes one when nothing waits", async () => {
    const { applier } = setup(1000);
    expect(applier.push([chain("a", 3000).event])).toBe(true); // over the bound, alone
    expect(applier.push([chain("b", 10).event])).toBe(false);
    expect(applier.pendingBlocks).toBe(3000);
    await drained(applier);
    expect(applier.push([chain("c", 600).event])).toBe(true);
    expect(applier.push([chain("d", 400).event])).toBe(true);
    expect(applier.push([{ type: "AllBlocksCleared" }])).toBe(false);
    expect(applier.drop()).toBe(2);
    expect(applier.pendingBlocks).toBe(0);
  });

  it("drop forgets what waits; later batches apply from where they start", async () => {
    const { index, applier } = setup();
    applier.push([chain("x", 5 * SLICE_BLOCKS).event]);
    await nextTurn();
    applier.drop();
    index.clear("w");
    const { event, tokens } = chain("y", 3, 1);
    applier.push([event]);
    await drained(applier);
    expect(index.blockCount("w")).toBe(3);
    expect(index.matchBlocks("w", blockKeys(tokens, BS, ""))).toBe(3);
  });

  it("sliced application agrees with applying every event whole, over random batches", async () => {
    const op = fc.oneof(
      fc.record({
        kind: fc.constant("store" as const),
        chain: fc.integer({ min: 0, max: 3 }),
        len: fc.integer({ min: 0, max: 2500 }),
      }),
      fc.record({
        kind: fc.constant("remove" as const),
        chain: fc.integer({ min: 0, max: 3 }),
        from: fc.integer({ min: 0, max: 2500 }),
        len: fc.integer({ min: 0, max: 2500 }),
      }),
      fc.constant({ kind: "clear" as const }),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.array(op, { maxLength: 4 }), { maxLength: 5 }),
        async (batches) => {
          const { index, applier } = setup();
          const reference = new PreciseIndex({
            maxBlocksPerWorker: 1_000_000,
            speculativeTtlMs: 1000,
          });
          reference.addWorker("w");
          const tokensOf = (c: number) => chain(`c${c}`, 2500, c).tokens;
          for (const ops of batches) {
            const events: KvEvent[] = ops.map((o) => {
              if (o.kind === "clear") return { type: "AllBlocksCleared" };
              const hashes = Array.from(
                { length: o.len },
                (_, i) => `c${o.chain}:${i + (o.kind === "remove" ? o.from : 0)}`,
              );
              if (o.kind === "remove")
                return { type: "BlockRemoved", blockHashes: hashes, medium: null };
              return stored(hashes, null, tokensOf(o.chain).slice(0, o.len * BS));
            });
            for (const e of events) reference.apply("w", e);
            applier.push(events);
          }
          await drained(applier);
          expect(index.blockCount("w")).toBe(reference.blockCount("w"));
          for (let c = 0; c < 4; c++) {
            const keys = blockKeys(tokensOf(c), BS, "");
            expect(index.matchBlocks("w", keys)).toBe(reference.matchBlocks("w", keys));
          }
        },
      ),
      { numRuns: 30 },
    );
  });
});
