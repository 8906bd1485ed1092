import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { BlockChain } from "../../src/index/block-chain.js";
import { BlockHashIndex } from "../../src/index/block-hash-index.js";
import { BlockLru } from "../../src/index/block-lru.js";
import type { PrefixIndex } from "../../src/index/prefix-index.js";
import { describePrefixIndex } from "./prefix-index.conformance.js";

// One-character blocks: the block index is then a character trie, held to the same naive model as
// the trees (every answer, size and truncate exactly).
describePrefixIndex("BlockHashIndex (1-character blocks)", {
  make: (options) =>
    new BlockHashIndex({
      blockChars: 1,
      maxBlocks: 4096,
      ...(options.maxTreeSize !== undefined ? { capacityBlocks: options.maxTreeSize } : {}),
    }),
  check: (index: PrefixIndex) => (index as BlockHashIndex).check(),
});

const ascii = fc.string({ unit: fc.constantFrom("a", "b", "c", " "), maxLength: 400 });

function matchOne(index: BlockHashIndex, text: string, id = "w", model?: string): number {
  const out: number[] = [];
  index.match(text, model, [{ id }], out);
  return out[0]!;
}

describe("BlockHashIndex", () => {
  it("never holds more blocks than its capacity, nor characters than its budget", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 16 }),
        fc.integer({ min: 1, max: 40 }),
        fc.array(fc.oneof(ascii, fc.constant("")), { maxLength: 40 }),
        fc.array(fc.integer({ min: 1, max: 2000 }), { maxLength: 3 }),
        (blockChars, capacityBlocks, texts, budgets) => {
          const index = new BlockHashIndex({ blockChars, capacityBlocks });
          index.addWorker("w");
          let capacity = capacityBlocks;
          texts.forEach((t, i) => {
            index.insert("w", undefined, t);
            expect(index.blocks("w")).toBeLessThanOrEqual(capacity);
            expect(index.size("w")).toBeLessThanOrEqual(capacity * blockChars);
            const budget = budgets[i % 7];
            if (budget !== undefined) {
              index.setBudget("w", budget);
              capacity = Math.floor(budget / blockChars);
              expect(index.blocks("w")).toBeLessThanOrEqual(capacity);
            }
            index.check();
          });
        },
      ),
      { numRuns: 300 },
    );
  });

  it("matches at most the text, in whole blocks; an inserted text matches its full blocks", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 32 }),
        fc.array(ascii, { minLength: 1, maxLength: 12 }),
        ascii,
        (blockChars, inserted, query) => {
          const index = new BlockHashIndex({ blockChars });
          index.addWorker("w");
          for (const t of inserted) {
            index.insert("w", undefined, t);
            // The text just routed: every full block of it, the partial tail dropped.
            expect(matchOne(index, t)).toBe(Math.floor(t.length / blockChars) * blockChars);
          }
          for (const q of [query, ...inserted.map((t) => t + query)]) {
            const m = matchOne(index, q);
            expect(m).toBeLessThanOrEqual(q.length);
            expect(m % blockChars).toBe(0);
            // Never more than the longest prefix some inserted text shares with the query.
            const shared = Math.max(
              0,
              ...inserted.map((t) => {
                let n = 0;
                while (n < t.length && n < q.length && t[n] === q[n]) n++;
                return n;
              }),
            );
            expect(m).toBeLessThanOrEqual(shared);
          }
          index.check();
        },
      ),
      { numRuns: 300 },
    );
  });

  it("drops the partial tail and matches a shared system prompt block by block", () => {
    const index = new BlockHashIndex({ blockChars: 64 });
    index.addWorker("a");
    index.addWorker("b");
    const system = "s".repeat(200);
    index.insert("a", undefined, `${system} first question`);
    // 200 + 15 = 215 characters: three full blocks (192), the tail dropped.
    expect(index.size("a")).toBe(192);
    const out: number[] = [];
    index.match(`${system} another question`, undefined, [{ id: "a" }, { id: "b" }], out);
    expect(out).toEqual([192, 0]);
    index.match("s".repeat(63), undefined, [{ id: "a" }], out);
    expect(out[0]).toBe(0);
  });

  it("keeps a surrogate pair whole at a block boundary", () => {
    const index = new BlockHashIndex({ blockChars: 4 });
    index.addWorker("w");
    index.insert("w", undefined, "abc😀defgh");
    // "abc" + the pair is one block of 5 code units, then "defg".
    expect(matchOne(index, "abc😀defgh")).toBe(9);
    expect(matchOne(index, "abc😁defgh")).toBe(0);
  });

  it("keeps models and adapters apart", () => {
    const index = new BlockHashIndex({ blockChars: 4 });
    index.addWorker("w");
    index.insert("w", "llama:lora-a", "shared prompt text");
    expect(matchOne(index, "shared prompt text", "w", "llama:lora-a")).toBe(16);
    expect(matchOne(index, "shared prompt text", "w", "llama:lora-b")).toBe(0);
    expect(matchOne(index, "shared prompt text", "w", undefined)).toBe(0);
  });

  it("truncates a rejected text to the blocks before keep, and what extends them", () => {
    const index = new BlockHashIndex({ blockChars: 4 });
    index.addWorker("w");
    index.insert("w", undefined, "aaaabbbbccccdddd");
    index.insert("w", undefined, "aaaabbbbxxxx");
    expect(index.truncate("w", undefined, "aaaabbbbccccdddd", 6)).toBe(16);
    expect(matchOne(index, "aaaabbbbccccdddd")).toBe(4);
    expect(matchOne(index, "aaaabbbbxxxx")).toBe(4);
    expect(index.size("w")).toBe(4);
    index.check();
  });

  it("evicts the least recently routed text first, tail blocks before heads", () => {
    const index = new BlockHashIndex({ blockChars: 4, capacityBlocks: 4 });
    index.addWorker("w");
    index.insert("w", undefined, "aaaabbbb");
    index.insert("w", undefined, "ccccdddd");
    index.insert("w", undefined, "aaaabbbb"); // aaaa bbbb newest again
    index.insert("w", undefined, "aaaaeeee"); // one over: dddd goes first, then not cccc's head
    expect(matchOne(index, "ccccdddd")).toBe(4);
    expect(matchOne(index, "aaaabbbb")).toBe(8);
    expect(matchOne(index, "aaaaeeee")).toBe(8);
    index.check();
  });

  it("refuses a bad block size or capacity with a clear error", () => {
    expect(() => new BlockHashIndex({ blockChars: 0 })).toThrow(/blockChars must be a positive/);
    expect(() => new BlockHashIndex({ capacityBlocks: 1.5 })).toThrow(/capacityBlocks/);
    expect(() => new BlockHashIndex({ maxBlocks: -1 })).toThrow(/maxBlocks/);
  });

  it("learns the block size once from an engine's block tokens, forgetting blocks cut at the old size", () => {
    const index = new BlockHashIndex({ blockChars: 64, capacityBlocks: 10 });
    index.addWorker("w");
    index.insert("w", undefined, "x".repeat(200));
    expect(index.learnBlockTokens(undefined)).toBe(false);
    expect(index.learnBlockTokens(0)).toBe(false);
    expect(index.learnBlockTokens(32)).toBe(true);
    expect(index.blockChars).toBe(128);
    expect(index.size("w")).toBe(0);
    index.insert("w", undefined, "x".repeat(300));
    expect(matchOne(index, "x".repeat(300))).toBe(256);
    // The budget stayed: 10 blocks of 64 = 640 characters, five blocks of 128.
    for (let i = 0; i < 20; i++) index.insert("w", undefined, `${i}`.repeat(300));
    expect(index.size("w")).toBeLessThanOrEqual(640);
    // A second report (another worker, another size) changes nothing.
    expect(index.learnBlockTokens(16)).toBe(false);
    expect(index.blockChars).toBe(128);
    index.check();
  });

  it("keeps its memory bounded by the capacity over 100k inserts (arrays reused, never regrown)", () => {
    const capacityBlocks = 100;
    const index = new BlockHashIndex({ blockChars: 4, capacityBlocks, maxBlocks: 16 });
    index.addWorker("w");
    let seed = 1;
    const next = (): number => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return seed;
    };
    for (let i = 0; i < 100_000; i++) {
      const text = `${next() % 50}-${next()}-${"z".repeat(next() % 60)}`;
      index.insert("w", undefined, text);
      if (i % 997 === 0) index.truncate("w", undefined, text, next() % 30);
    }
    expect(index.blocks("w")).toBeLessThanOrEqual(capacityBlocks);
    // The peak is the capacity plus one text's blocks (inserted before the eviction that follows).
    const { slots, table } = index.lruOf("w")!.allocated;
    expect(slots).toBeLessThanOrEqual(128);
    expect(table).toBeLessThanOrEqual(256);
    index.check();
  });

  it("hashes at most maxBlocks blocks of a long text", () => {
    const index = new BlockHashIndex({ blockChars: 4, maxBlocks: 3 });
    index.addWorker("w");
    index.insert("w", undefined, "x".repeat(100));
    expect(index.blocks("w")).toBe(3);
    expect(matchOne(index, "x".repeat(100))).toBe(12);
  });
});

describe("BlockLru table", () => {
  it("answers the same whatever another worker's answer it starts from", () => {
    fc.assert(
      fc.property(fc.array(ascii, { minLength: 1, maxLength: 8 }), ascii, (inserted, query) => {
        const chain = new BlockChain(2, 256, 3);
        const lru = new BlockLru(1_000_000, undefined);
        for (const t of inserted) {
          chain.cut(t, undefined);
          lru.insert(chain);
        }
        for (const q of [query, ...inserted.map((t) => t.slice(0, t.length >> 1) + query)]) {
          chain.cut(q, undefined);
          const plain = lru.matchBlocks(chain);
          for (let guess = 0; guess <= chain.count + 1; guess++) {
            expect(lru.matchBlocks(chain, guess)).toBe(plain);
          }
        }
      }),
      { numRuns: 200 },
    );
  });

  it("tells apart keys whose low 32 bits are equal (one home in the table, long probe runs)", () => {
    const chain = new BlockChain(4, 64, 1);
    const lru = new BlockLru(1_000, undefined);
    const collide = (text: string): void => {
      chain.cut(text, undefined);
      chain.los.fill(7, 0, chain.count);
    };
    collide("aaaabbbbcccc");
    lru.insert(chain);
    collide("aaaaxxxx");
    lru.insert(chain);
    expect(lru.blocks).toBe(4);
    collide("aaaabbbbcccc");
    expect(lru.matchBlocks(chain)).toBe(3);
    collide("aaaaxxxxyyyy");
    expect(lru.matchBlocks(chain)).toBe(2);
    collide("aaaabbbbcccc");
    expect(lru.truncate(chain, 1)).toBe(8);
    expect(lru.matchBlocks(chain)).toBe(1);
    collide("aaaaxxxx");
    expect(lru.matchBlocks(chain)).toBe(2);
    lru.check();
  });
});
