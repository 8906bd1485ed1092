import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { BlockStored, KvEvent } from "../../src/index/block-events.js";
import { blockKeys } from "../../src/index/block-keys.js";
import { PreciseIndex } from "../../src/index/precise-index.js";

const BS = 4;
const tokens = (n: number, seed = 0) => Array.from({ length: n }, (_, i) => (i * 7 + seed) % 1000);

function stored(
  hashes: string[],
  parent: string | null,
  ids: number[],
  extra: Partial<BlockStored> = {},
): KvEvent {
  return {
    type: "BlockStored",
    blockHashes: hashes,
    parentHash: parent,
    tokenIds: ids,
    blockSize: BS,
    loraId: null,
    medium: null,
    loraName: null,
    ...extra,
  };
}

function setup(now = () => 0) {
  const index = new PreciseIndex({ maxBlocksPerWorker: 100, speculativeTtlMs: 1000, now });
  index.addWorker("w");
  return index;
}

describe("PreciseIndex", () => {
  it("matches the leading blocks a BlockStored reported, across events chained by parent hash", () => {
    const index = setup();
    const t = tokens(16);
    expect(index.apply("w", stored(["a", "b"], null, t.slice(0, 8)))).toBe("applied");
    expect(index.apply("w", stored(["c"], "b", t.slice(8, 12)))).toBe("applied");
    const keys = index.keysFor("w", t, undefined)!;
    expect(keys).toHaveLength(4);
    expect(index.matchBlocks("w", keys)).toBe(3);
    expect(index.matchBlocks("w", index.keysFor("w", tokens(16, 1), undefined)!)).toBe(0);
    expect(index.size).toBe(3);
  });

  it("BlockRemoved stops the match at the removed block; AllBlocksCleared forgets everything", () => {
    const index = setup();
    const t = tokens(12);
    index.apply("w", stored(["a", "b", "c"], null, t));
    const keys = index.keysFor("w", t, undefined)!;
    index.apply("w", { type: "BlockRemoved", blockHashes: ["b"], medium: null });
    expect(index.matchBlocks("w", keys)).toBe(1);
    index.apply("w", { type: "AllBlocksCleared" });
    expect(index.matchBlocks("w", keys)).toBe(0);
    expect(index.size).toBe(0);
  });

  it("skips a block whose parent it never saw, and token counts that do not fit the hashes", () => {
    const index = setup();
    expect(index.apply("w", stored(["b"], "unknown", tokens(4)))).toBe("orphan");
    expect(index.apply("w", stored(["b"], null, tokens(5)))).toBe("malformed");
    expect(index.size).toBe(0);
  });

  it("ignores blocks on another medium (CPU offload) and keeps adapters apart", () => {
    const index = setup();
    const t = tokens(8);
    expect(index.apply("w", stored(["a"], null, t.slice(0, 4), { medium: "CPU" }))).toBe("ignored");
    index.apply("w", stored(["l1", "l2"], null, t, { loraName: "sql" }));
    expect(index.matchBlocks("w", index.keysFor("w", t, undefined)!)).toBe(0);
    expect(index.matchBlocks("w", index.keysFor("w", t, "sql")!)).toBe(2);
  });

  it("speculative entries expire after the TTL unless a BlockStored confirms them", () => {
    let now = 0;
    const index = setup(() => now);
    index.apply("w", stored(["seed"], null, tokens(4, 9)));
    const t = tokens(12);
    const keys = index.keysFor("w", t, undefined)!;
    index.speculate("w", keys);
    expect(index.matchBlocks("w", keys)).toBe(3);
    index.apply("w", stored(["a"], null, t.slice(0, 4)));
    now = 1500;
    expect(index.matchBlocks("w", keys)).toBe(1);
    index.speculate("w", keys);
    index.withdraw("w", keys, 2);
    expect(index.matchBlocks("w", keys)).toBe(2);
  });

  it("stays within its bound, dropping the oldest engine blocks first", () => {
    const index = new PreciseIndex({ maxBlocksPerWorker: 3, speculativeTtlMs: 1000 });
    index.addWorker("w");
    const t = tokens(20);
    for (let i = 0; i < 5; i++) {
      index.apply("w", stored([`h${i}`], i === 0 ? null : `h${i - 1}`, t.slice(i * 4, i * 4 + 4)));
    }
    expect(index.blockCount("w")).toBe(3);
    expect(index.size).toBe(3);
    expect(index.matchBlocks("w", index.keysFor("w", t, undefined)!)).toBe(0);
    index.speculate("w", blockKeys(tokens(40, 3), 4, ""));
    expect(index.speculativeCount("w")).toBeLessThanOrEqual(3);
  });

  it("keeps no more blocks than the engine's cache holds once told (setBlockLimit), never more than its bound", () => {
    const index = new PreciseIndex({ maxBlocksPerWorker: 10, speculativeTtlMs: 1000 });
    index.addWorker("w");
    const t = tokens(40);
    const store = (i: number) =>
      index.apply("w", stored([`h${i}`], i === 0 ? null : `h${i - 1}`, t.slice(i * 4, i * 4 + 4)));
    for (let i = 0; i < 6; i++) store(i);
    index.setBlockLimit("w", 4); // drops the 2 oldest at once
    expect(index.blockCount("w")).toBe(4);
    expect(index.size).toBe(4);
    for (let i = 6; i < 8; i++) store(i);
    expect(index.blockCount("w")).toBe(4);
    index.setBlockLimit("w", 1_000); // a cache larger than the bound: the bound holds
    expect(index.blockLimitOf("w")).toBe(10);
    index.setBlockLimit("w", 2.5); // a capacity not a whole number of blocks: rounded up
    expect(index.blockLimitOf("w")).toBe(3);
    index.setBlockLimit("w", undefined);
    expect(index.blockLimitOf("w")).toBe(10);
  });

  it("agrees with a reference model over random store/remove sequences", () => {
    // Reference: the engine's blocks as a set of chains; match = leading blocks still present.
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            fc.record({
              op: fc.constant("store" as const),
              chain: fc.nat(3),
              len: fc.integer({ min: 1, max: 4 }),
            }),
            fc.record({ op: fc.constant("remove" as const), chain: fc.nat(3), at: fc.nat(3) }),
            fc.constant({ op: "clear" as const }),
          ),
          { maxLength: 30 },
        ),
        (ops) => {
          const index = setup();
          const present = new Set<string>();
          const chainTokens = (c: number) => tokens(16, c * 101);
          for (const o of ops) {
            if (o.op === "store") {
              const t = chainTokens(o.chain);
              const hashes = Array.from({ length: o.len }, (_, i) => `${o.chain}:${i}`);
              index.apply("w", stored(hashes, null, t.slice(0, o.len * BS)));
              for (const h of hashes) present.add(h);
            } else if (o.op === "remove") {
              index.apply("w", {
                type: "BlockRemoved",
                blockHashes: [`${o.chain}:${o.at}`],
                medium: null,
              });
              present.delete(`${o.chain}:${o.at}`);
            } else {
              index.apply("w", { type: "AllBlocksCleared" });
              present.clear();
            }
          }
          for (let c = 0; c < 4; c++) {
            let expected = 0;
            while (expected < 4 && present.has(`${c}:${expected}`)) expected++;
            const keys = blockKeys(chainTokens(c), BS, "");
            expect(index.matchBlocks("w", keys)).toBe(expected);
          }
          expect(index.size).toBe(present.size);
        },
      ),
    );
  });

  it("drops the oldest block still held, in arrival order, across removals and re-stores", () => {
    const bound = 6;
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            fc.record({ op: fc.constant("store" as const), h: fc.integer({ min: 0, max: 15 }) }),
            fc.record({ op: fc.constant("remove" as const), h: fc.integer({ min: 0, max: 15 }) }),
            fc.record({ op: fc.constant("clear" as const) }),
          ),
          { maxLength: 200 },
        ),
        (ops) => {
          const index = new PreciseIndex({ maxBlocksPerWorker: bound, speculativeTtlMs: 1000 });
          index.addWorker("w");
          // The reference: held hashes in arrival order; a re-store of a held hash keeps its place.
          let held: number[] = [];
          for (const o of ops) {
            if (o.op === "store") {
              index.apply("w", stored([`h${o.h}`], null, tokens(BS, o.h)));
              if (!held.includes(o.h)) held.push(o.h);
              if (held.length > bound) held = held.slice(held.length - bound);
            } else if (o.op === "remove") {
              index.apply("w", { type: "BlockRemoved", blockHashes: [`h${o.h}`], medium: null });
              held = held.filter((h) => h !== o.h);
            } else {
              index.apply("w", { type: "AllBlocksCleared" });
              held = [];
            }
          }
          expect(index.blockCount("w")).toBe(held.length);
          for (let h = 0; h < 16; h++) {
            const keys = blockKeys(tokens(BS, h), BS, "");
            expect(index.matchBlocks("w", keys)).toBe(held.includes(h) ? 1 : 0);
          }
        },
      ),
    );
  });

  // Issue 20: eviction walked from the Map's start past every deleted slot, so trimming k blocks
  // cost O(k²): one batch of 600k blocks into a 262,144-block bound took 38.6 s, and a stream of
  // small batches past the bound slowed the same way. Linear now: well under a second here, where
  // the old code took over 10 s for each half.
  it("trims a batch far over its bound, and a long stream past it, in linear time", () => {
    const index = new PreciseIndex({ maxBlocksPerWorker: 100_000, speculativeTtlMs: 1000 });
    index.addWorker("w");
    const n = 250_000;
    const hashes = Array.from({ length: n }, (_, i) => `b${i}`);
    const ids = Array.from({ length: n }, (_, i) => i % 50_000);
    let start = performance.now();
    index.apply("w", { ...(stored(hashes, null, ids) as BlockStored), blockSize: 1 });
    expect(index.blockCount("w")).toBe(100_000);
    const batchMs = performance.now() - start;
    start = performance.now();
    for (let i = 0; i < 150_000; i++) {
      index.apply("w", { ...(stored([`s${i}`], null, [i]) as BlockStored), blockSize: 1 });
    }
    expect(index.blockCount("w")).toBe(100_000);
    const streamMs = performance.now() - start;
    // Wide margins for a shared machine (each took 5 s at load average 20 on 2 cores); the
    // quadratic walk took tens of seconds on a quiet one.
    expect(batchMs).toBeLessThan(15_000);
    expect(streamMs).toBeLessThan(15_000);
  }, 120_000);
});

describe("PreciseIndex: multimodal blocks (vLLM extra_keys)", () => {
  it("blocks of different images under the same placeholder tokens get different keys", () => {
    const index = setup();
    index.addWorker("v");
    const t = tokens(12);
    // Block 2 holds the image: same placeholder tokens, different image hashes.
    index.apply("w", stored(["a", "b", "c"], null, t, { mediaKeys: [null, '["img-1",0]', null] }));
    index.apply("v", stored(["a", "b", "c"], null, t, { mediaKeys: [null, '["img-2",0]', null] }));
    const keys = index.keysFor("w", t, undefined)!;
    // A request's tokens alone cannot reproduce an image's key: the match stops before it.
    expect(index.matchBlocks("w", keys)).toBe(1);
    expect(index.matchBlocks("v", keys)).toBe(1);
    // The same image's later blocks chain on; another image's never meet them.
    index.apply("w", stored(["d"], "c", tokens(4, 5)));
    index.apply("v", stored(["d"], "c", tokens(4, 5)));
    expect(index.blockCount("w")).toBe(4);
    expect(index.blockCount("v")).toBe(4);
  });
});

describe("PreciseIndex: offloaded KV tiers (vLLM medium)", () => {
  const weights = { gpu: 1, cpu: 0.8, disk: 0.3 };
  function tiered(maxBlocksPerWorker = 100) {
    const index = new PreciseIndex({
      maxBlocksPerWorker,
      speculativeTtlMs: 1000,
      tierWeights: weights,
    });
    index.addWorker("w");
    return index;
  }
  const removed = (hashes: string[], medium: string | null): KvEvent => ({
    type: "BlockRemoved",
    blockHashes: hashes,
    medium,
  });

  it("a block that moves from GPU to CPU moves in the index; removed from every tier it is gone", () => {
    const index = tiered();
    const t = tokens(12);
    const keys = blockKeys(t, BS, "");
    index.apply("w", stored(["a", "b", "c"], null, t));
    expect(index.matchBlocks("w", keys)).toBe(3);
    // Offloaded (stored on CPU), then evicted from the GPU: block c now loads from the CPU.
    index.apply("w", stored(["c"], "b", t.slice(8, 12), { medium: "CPU" }));
    index.apply("w", removed(["c"], "GPU"));
    expect(index.matchBlocks("w", keys)).toBeCloseTo(2.8);
    expect(index.tierBlockCount("w", 0)).toBe(2);
    expect(index.tierBlockCount("w", 1)).toBe(1);
    // The CPU copy goes too: nothing past b.
    index.apply("w", removed(["c"], "CPU"));
    expect(index.matchBlocks("w", keys)).toBe(2);
    expect(index.size).toBe(2);
  });

  it("credits the run after the GPU prefix at each block's best lower tier, and stops at a gap", () => {
    const index = tiered();
    const t = tokens(20);
    const keys = blockKeys(t, BS, "");
    index.apply("w", stored(["a"], null, t.slice(0, 4)));
    index.apply("w", stored(["b", "c"], "a", t.slice(4, 12), { medium: "CPU" }));
    index.apply("w", stored(["c", "d"], "b", t.slice(8, 16), { medium: "STORAGE" }));
    // a on GPU, b and c on CPU (c on storage too: its best), d on storage, e nowhere.
    expect(index.matchBlocks("w", keys)).toBeCloseTo(1 + 0.8 + 0.8 + 0.3);
    index.apply("w", removed(["b"], "CPU"));
    expect(index.matchBlocks("w", keys)).toBe(1);
  });

  it("keys an offloaded block named by its hash alone (no tokens) from the tier that knows it", () => {
    const index = tiered();
    const t = tokens(8);
    const keys = blockKeys(t, BS, "");
    index.apply("w", stored(["a", "b"], null, t));
    const placeholder = { tokenIds: [], blockSize: 0, medium: "CPU" } as const;
    expect(index.apply("w", stored(["b"], null, [], placeholder))).toBe("applied");
    expect(index.apply("w", stored(["zz"], null, [], placeholder))).toBe("orphan");
    index.apply("w", removed(["b"], "GPU"));
    expect(index.matchBlocks("w", keys)).toBeCloseTo(1.8);
    // A GPU event without tokens stays malformed.
    expect(index.apply("w", stored(["q"], null, [], { blockSize: 0 }))).toBe("malformed");
  });

  it("tier-blind weights (cpu=0, disk=0) keep the GPU cache alone, as before", () => {
    const index = new PreciseIndex({
      maxBlocksPerWorker: 100,
      speculativeTtlMs: 1000,
      tierWeights: { gpu: 1, cpu: 0, disk: 0 },
    });
    index.addWorker("w");
    const t = tokens(8);
    index.apply("w", stored(["a"], null, t.slice(0, 4)));
    expect(index.apply("w", stored(["b"], "a", t.slice(4, 8), { medium: "CPU" }))).toBe("ignored");
    expect(index.matchBlocks("w", index.keysFor("w", t, undefined)!)).toBe(1);
    expect(index.size).toBe(1);
  });

  it("bounds each lower tier by maxBlocksPerWorker, apart from the GPU's limit", () => {
    const index = tiered(4);
    const t = tokens(40);
    for (let i = 0; i < 10; i++) {
      const parent = i === 0 ? null : `h${i - 1}`;
      index.apply("w", stored([`h${i}`], parent, t.slice(i * 4, i * 4 + 4), { medium: "CPU" }));
    }
    expect(index.tierBlockCount("w", 1)).toBe(4);
    index.setBlockLimit("w", 2);
    index.apply("w", stored(["g0", "g1", "g2"], null, t.slice(0, 12)));
    expect(index.blockCount("w")).toBe(2);
    expect(index.tierBlockCount("w", 1)).toBe(4);
    expect(index.size).toBe(6);
  });

  it("agrees with a per-tier reference model over random store/move/remove sequences", () => {
    const MEDIA = ["GPU", "CPU", "STORAGE"] as const;
    const W = [1, 0.8, 0.3];
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            fc.record({
              op: fc.constant("store" as const),
              tier: fc.nat(2),
              from: fc.nat(3),
              len: fc.integer({ min: 1, max: 4 }),
            }),
            fc.record({
              op: fc.constant("move" as const),
              from: fc.nat(2),
              to: fc.nat(2),
              at: fc.nat(3),
            }),
            fc.record({ op: fc.constant("remove" as const), tier: fc.nat(2), at: fc.nat(3) }),
            fc.constant({ op: "clear" as const }),
          ),
          { maxLength: 40 },
        ),
        (ops) => {
          const index = tiered();
          const t = tokens(16);
          // The reference: which tiers hold each of the chain's 4 blocks.
          const held = [new Set<number>(), new Set<number>(), new Set<number>()];
          const store = (tier: number, from: number, len: number) => {
            const to = Math.min(4, from + len);
            if (from > 0 && !held.some((s) => s.has(from - 1))) return; // an orphan: not applied
            const hashes = Array.from({ length: to - from }, (_, i) => `b${from + i}`);
            index.apply(
              "w",
              stored(hashes, from === 0 ? null : `b${from - 1}`, t.slice(from * BS, to * BS), {
                medium: MEDIA[tier]!,
              }),
            );
            for (let i = from; i < to; i++) held[tier]!.add(i);
          };
          for (const o of ops) {
            if (o.op === "store") store(o.tier, o.from, o.len);
            else if (o.op === "move") {
              if (!held[o.from]!.has(o.at)) continue;
              // Stored on the new tier first, then removed from the old one, as the engines do.
              index.apply(
                "w",
                stored([`b${o.at}`], null, [], {
                  tokenIds: [],
                  blockSize: 0,
                  medium: MEDIA[o.to]!,
                }),
              );
              if (o.to !== 0) held[o.to]!.add(o.at);
              if (o.from !== o.to) {
                index.apply("w", removed([`b${o.at}`], MEDIA[o.from]!));
                held[o.from]!.delete(o.at);
              }
            } else if (o.op === "remove") {
              index.apply("w", removed([`b${o.at}`], MEDIA[o.tier]!));
              held[o.tier]!.delete(o.at);
            } else {
              index.apply("w", { type: "AllBlocksCleared" });
              for (const s of held) s.clear();
            }
          }
          let expected = 0;
          let i = 0;
          for (; i < 4 && held[0]!.has(i); i++) expected += W[0]!;
          for (; i < 4; i++) {
            const best = held[1]!.has(i) ? W[1]! : held[2]!.has(i) ? W[2]! : 0;
            if (best === 0) break;
            expected += best;
          }
          expect(index.matchBlocks("w", blockKeys(t, BS, ""))).toBeCloseTo(expected);
          expect(index.size).toBe(held[0]!.size + held[1]!.size + held[2]!.size);
        },
      ),
    );
  });
});
