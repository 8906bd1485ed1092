import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { chainHash, type KvAllocation, PrefixKvCache } from "../../sim/kv-cache.js";

const BS = 16;

function ids(n: number, seed = 0): number[] {
  return Array.from({ length: n }, (_, i) => (seed * 104_729 + i * 7 + 1) % 128_000);
}

/** Admit, compute and release a prompt, as a finished prefill-only request would. */
function serve(kv: PrefixKvCache, prompt: number[]): number {
  const alloc = kv.allocate(prompt, prompt.length);
  if (alloc === undefined) throw new Error("no room");
  kv.commit(alloc, prompt, prompt.length);
  kv.release(alloc);
  return alloc.cachedTokens;
}

describe("PrefixKvCache: hits", () => {
  it("finds a repeated prefix at block granularity", () => {
    const kv = new PrefixKvCache({ capacityTokens: 1024, blockSize: BS });
    const base = ids(40);
    expect(serve(kv, base)).toBe(0);
    // Shares 35 tokens: two full blocks (32 tokens) match, the third block differs.
    expect(kv.cachedPrefixTokens([...base.slice(0, 35), ...ids(20, 5)])).toBe(32);
    // Shares 15 tokens: not even one full block.
    expect(kv.cachedPrefixTokens([...base.slice(0, 15), ...ids(30, 6)])).toBe(0);
  });

  it("leaves at least one prompt token to compute, as vLLM does", () => {
    const kv = new PrefixKvCache({ capacityTokens: 1024, blockSize: BS });
    const p = ids(32);
    serve(kv, p);
    expect(serve(kv, p)).toBe(16);
    expect(serve(kv, [...p, 99])).toBe(32);
  });

  it("chains hashes: the same block after a different prefix is a different block", () => {
    const block = ids(BS, 3);
    expect(chainHash(1, block, 0, BS)).toBe(chainHash(1, block, 0, BS));
    expect(chainHash(1, block, 0, BS)).not.toBe(chainHash(2, block, 0, BS));
    const kv = new PrefixKvCache({ capacityTokens: 1024, blockSize: BS });
    serve(kv, [...ids(BS, 1), ...block, 0]);
    expect(kv.cachedPrefixTokens([...ids(BS, 2), ...block, 0])).toBe(0);
  });

  it("only caches full blocks", () => {
    const kv = new PrefixKvCache({ capacityTokens: 1024, blockSize: BS });
    serve(kv, ids(20));
    expect(kv.evictableBlocks).toBe(1);
  });
});

describe("PrefixKvCache: eviction and capacity", () => {
  it("evicts the least recently used unreferenced blocks first", () => {
    const kv = new PrefixKvCache({ capacityTokens: 6 * BS, blockSize: BS });
    const a = ids(2 * BS + 1, 1);
    const b = ids(2 * BS + 1, 2);
    serve(kv, a); // 3 blocks while running, 2 full blocks stay cached
    serve(kv, b);
    serve(kv, a); // touch a: b is now least recently used
    expect(kv.usedBlocks).toBe(4);
    expect(kv.cachedPrefixTokens(a)).toBe(2 * BS);
    serve(kv, ids(3 * BS + 1, 3)); // needs 4 blocks, 2 unused: b's two blocks go
    expect(kv.cachedPrefixTokens(a)).toBe(2 * BS);
    expect(kv.cachedPrefixTokens(b)).toBe(0);
    expect(kv.evictions).toBeGreaterThan(0);
  });

  it("evicts a freed sequence's tail before its prefix", () => {
    const kv = new PrefixKvCache({ capacityTokens: 4 * BS, blockSize: BS });
    const a = ids(3 * BS + 1, 1);
    serve(kv, a); // 3 cached blocks, 1 unused
    const other = kv.allocate(ids(BS, 9), 2 * BS); // needs 2 blocks: 1 unused + 1 evicted
    expect(other).toBeDefined();
    expect(kv.cachedPrefixTokens(a)).toBe(2 * BS);
  });

  it("never evicts blocks pinned by a running request", () => {
    const kv = new PrefixKvCache({ capacityTokens: 4 * BS, blockSize: BS });
    const a = ids(3 * BS, 1);
    const held = kv.allocate(a, 4 * BS) as KvAllocation; // the whole pool
    kv.commit(held, a, a.length);
    expect(kv.allocate(ids(BS, 2), BS)).toBeUndefined();
    expect(kv.cachedPrefixTokens([...a, 1])).toBe(3 * BS);
    kv.release(held);
    expect(kv.allocate(ids(BS, 2), BS)).toBeDefined();
  });

  it("a refused allocation changes nothing", () => {
    const kv = new PrefixKvCache({ capacityTokens: 4 * BS, blockSize: BS });
    const a = ids(2 * BS + 1, 1);
    serve(kv, a);
    const held = kv.allocate(ids(BS, 5), 3 * BS) as KvAllocation;
    const before = [kv.usedBlocks, kv.pinnedBlocks, kv.reservedBlocks, kv.evictableBlocks];
    expect(kv.allocate([...a.slice(0, 2 * BS), ...ids(40, 6)], 4 * BS)).toBeUndefined();
    expect([kv.usedBlocks, kv.pinnedBlocks, kv.reservedBlocks, kv.evictableBlocks]).toEqual(before);
    kv.release(held);
  });

  it("keeps one copy of a block two requests computed at the same time", () => {
    const kv = new PrefixKvCache({ capacityTokens: 64 * BS, blockSize: BS });
    const p = ids(3 * BS + 4);
    const x = kv.allocate(p, p.length) as KvAllocation;
    const y = kv.allocate(p, p.length) as KvAllocation;
    kv.commit(x, p, p.length);
    kv.commit(y, p, p.length);
    expect(kv.pinnedBlocks).toBe(3);
    expect(kv.reservedBlocks).toBe(2); // each keeps its private partial tail block
    kv.release(x);
    kv.release(y);
    expect(kv.usedBlocks).toBe(3);
    expect(kv.pinnedBlocks + kv.reservedBlocks).toBe(0);
  });

  it("respects its capacity under any sequence of admissions, commits and releases", () => {
    const op = fc.oneof(
      fc.record({
        kind: fc.constant("alloc" as const),
        family: fc.nat(3),
        len: fc.integer({ min: 1, max: 90 }),
        extra: fc.nat(40),
      }),
      fc.record({ kind: fc.constant("commit" as const), which: fc.nat(20), upto: fc.nat(200) }),
      fc.record({ kind: fc.constant("release" as const), which: fc.nat(20) }),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 120 }), (ops) => {
        const kv = new PrefixKvCache({ capacityTokens: 10 * BS, blockSize: BS });
        const live: { alloc: KvAllocation; tokens: number[] }[] = [];
        for (const o of ops) {
          if (o.kind === "alloc") {
            // Prompts of one family share prefixes, so hits and evictions both happen.
            const tokens = ids(o.len + o.extra, o.family);
            const alloc = kv.allocate(tokens.slice(0, o.len), o.len + o.extra);
            if (alloc !== undefined) live.push({ alloc, tokens });
          } else if (live.length > 0) {
            const i = o.which % live.length;
            const entry = live[i] as { alloc: KvAllocation; tokens: number[] };
            if (o.kind === "commit") kv.commit(entry.alloc, entry.tokens, o.upto);
            else {
              kv.release(entry.alloc);
              live.splice(i, 1);
            }
          }
          expect(kv.usedBlocks).toBeLessThanOrEqual(kv.totalBlocks);
          expect(kv.pinnedBlocks).toBeGreaterThanOrEqual(0);
          expect(kv.reservedBlocks).toBeGreaterThanOrEqual(0);
        }
        for (const { alloc } of live) kv.release(alloc);
        expect(kv.pinnedBlocks).toBe(0);
        expect(kv.reservedBlocks).toBe(0);
        expect(kv.usedBlocks).toBe(kv.evictableBlocks);
      }),
      { seed: 42, numRuns: 300 },
    );
  });

  it("rejects a pool smaller than one block", () => {
    expect(() => new PrefixKvCache({ capacityTokens: 8, blockSize: BS })).toThrow(RangeError);
    expect(() => new PrefixKvCache({ capacityTokens: 64, blockSize: 0 })).toThrow(RangeError);
  });
});

describe("PrefixKvCache: a CPU tier behind the GPU pool (offloading)", () => {
  function recording() {
    const events: string[] = [];
    const listener = {
      stored: (hashes: number[], _parent: number | null, _tokens: number[], medium = "GPU") =>
        events.push(`stored ${medium} ${hashes.length}`),
      removed: (hashes: number[], medium = "GPU") =>
        events.push(`removed ${medium} ${hashes.length}`),
      cleared: () => events.push("cleared"),
    };
    return { events, listener };
  }

  /** A GPU pool of `gpuBlocks` behind a CPU tier of `cpuBlocks` (0: none), its events recorded. */
  function tiered(gpuBlocks: number, cpuBlocks: number) {
    const { events, listener } = recording();
    const kv = new PrefixKvCache({
      capacityTokens: gpuBlocks * BS,
      blockSize: BS,
      cpuTierTokens: cpuBlocks * BS,
      listener,
    });
    return { events, kv };
  }

  it("writes computed blocks through to the CPU tier; a GPU eviction leaves the CPU copy, which loads back", () => {
    // GPU: 4 blocks; CPU: 16.
    const { events, kv } = tiered(4, 16);
    const a = ids(3 * BS + 1, 1);
    const b = ids(3 * BS + 1, 2);
    expect(serve(kv, a)).toBe(0);
    expect(events).toEqual(["stored GPU 3", "stored CPU 3"]);
    expect(kv.cpuBlocks).toBe(3);
    events.length = 0;
    serve(kv, b); // evicts a's blocks from the GPU: they stay on the CPU
    expect(events).toContain("removed GPU 3");
    expect(events).not.toContain("removed CPU 3");
    expect(kv.has(kv.blockHashes(a)[0]!)).toBe(false);
    expect(kv.onCpu(kv.blockHashes(a)[0]!)).toBe(true);
    // a's prefix is cached again, through the CPU tier: loaded, not computed.
    expect(kv.cachedPrefixTokens(a)).toBe(3 * BS);
    const alloc = kv.allocate(a, a.length)!;
    expect(alloc.cachedTokens).toBe(3 * BS);
    expect(alloc.loadedTokens).toBe(3 * BS);
    expect(kv.has(kv.blockHashes(a)[2]!)).toBe(true);
    expect(kv.loadedBlocks).toBe(3);
  });

  it("the CPU tier keeps its own LRU bound and announces what it drops", () => {
    const { events, kv } = tiered(8, 4);
    serve(kv, ids(3 * BS + 1, 1));
    serve(kv, ids(3 * BS + 1, 2));
    expect(kv.cpuBlocks).toBe(4);
    expect(events).toContain("removed CPU 2");
  });

  it("a lookup touches the CPU copies last block first, so the tier drops a suffix before its prefix", () => {
    const { kv } = tiered(16, 4);
    const a = ids(3 * BS + 1, 1);
    serve(kv, a); // CPU, oldest first: a0 a1 a2
    expect(serve(kv, a)).toBe(3 * BS); // a GPU hit; the lookup touches a2, a1, a0
    serve(kv, ids(2 * BS + 1, 2)); // two new blocks: the oldest one goes
    const [a0, a1, a2] = kv.blockHashes(a);
    expect([kv.onCpu(a0!), kv.onCpu(a1!), kv.onCpu(a2!)]).toEqual([true, true, false]);
  });

  it("stores on the CPU tier only blocks it does not hold yet: a load republishes nothing there", () => {
    const { events, kv } = tiered(4, 16);
    const a = ids(3 * BS + 1, 1);
    serve(kv, a);
    serve(kv, ids(3 * BS + 1, 2)); // a off the GPU, still on the CPU
    events.length = 0;
    expect(serve(kv, a)).toBe(3 * BS);
    expect(events.filter((e) => e.startsWith("stored CPU"))).toEqual([]);
    expect(events).toContain("stored GPU 3");
  });

  it("without a CPU tier nothing changes: no CPU events, nothing loaded", () => {
    const { events, kv } = tiered(4, 0);
    const a = ids(3 * BS + 1, 1);
    serve(kv, a);
    serve(kv, ids(3 * BS + 1, 2));
    expect(events.some((e) => e.includes("CPU"))).toBe(false);
    expect(serve(kv, a)).toBe(0);
  });
});
