import { Pool } from "undici";
import { describe, expect, it } from "vitest";
import { encodeBatch } from "../../sim/kv-event-encoder.js";
import { renderChat } from "../../sim/template.js";
import { tokenize } from "../../sim/tokenizer.js";
import { startSimWorker } from "../../sim/worker.js";
import { ApproximateIndex } from "../../src/index/approximate-index.js";
import { blockKeys } from "../../src/index/block-keys.js";
import { charsFor, HybridIndex, type TokenSource } from "../../src/index/hybrid-index.js";
import { PreciseIndex } from "../../src/index/precise-index.js";
import { rankIndexId } from "../../src/index/rank-id.js";
import { saltedKey, splitSalted } from "../../src/index/salted-key.js";
import type { TokenizeInput } from "../../src/index/tokenize-input.js";
import { decodeBatch } from "../../src/kv-events/decode.js";
import { TokenizerClient } from "../../src/kv-events/tokenizer-client.js";

const BS = 4;
const TEXT = "a".repeat(160);
/** 40 tokens: 10 blocks of 4. */
const TOKENS = Array.from({ length: 40 }, (_, i) => i + 1);
const workers = [{ id: "a" }, { id: "b" }];

/** Tokens from a table, answered after `delayMs`; liveness per worker. */
class TableSource implements TokenSource {
  live = new Set(["a", "b"]);
  delayMs = 0;
  calls = 0;
  private readonly known = new Map<string, readonly number[]>();
  isLive(id: string) {
    return this.live.has(id);
  }
  cached(_model: string | undefined, input: TokenizeInput) {
    return "prompt" in input ? this.known.get(input.prompt) : undefined;
  }
  async tokenize(_ids: readonly string[], _model: string | undefined, input: TokenizeInput) {
    this.calls++;
    await new Promise((r) => setTimeout(r, this.delayMs));
    const tokens = "prompt" in input && input.prompt === TEXT ? TOKENS : undefined;
    if (tokens !== undefined && "prompt" in input) this.known.set(input.prompt, tokens);
    return tokens;
  }
}

function setup(budgetMs = 1000) {
  const precise = new PreciseIndex({ maxBlocksPerWorker: 1000, speculativeTtlMs: 60_000 });
  const source = new TableSource();
  const misses: string[] = [];
  const index = new HybridIndex(new ApproximateIndex(), precise, source, {
    tokenizeBudgetMs: budgetMs,
    defaultBlockSize: BS,
    onTokenizeMiss: (r) => misses.push(r),
  });
  for (const w of workers) index.addWorker(w.id);
  return { index, precise, source, misses };
}

/** Worker `id` stores the first `blocks` blocks of TOKENS. */
function store(precise: PreciseIndex, id: string, blocks: number) {
  precise.apply(id, {
    type: "BlockStored",
    blockHashes: Array.from({ length: blocks }, (_, i) => `${id}${i}`),
    parentHash: null,
    tokenIds: TOKENS.slice(0, blocks * BS),
    blockSize: BS,
    loraId: null,
    medium: null,
    loraName: null,
  });
}

const request = { text: TEXT, model: undefined, tokenizeInput: { prompt: TEXT } };

describe("HybridIndex", () => {
  it("answers from the engines' blocks for live workers and says so", async () => {
    const { index, precise } = setup();
    store(precise, "a", 5);
    // b's approximate tree thinks it holds everything; its events say nothing.
    index.insert("b", undefined, TEXT);
    await index.prepare(request, workers);
    const out: number[] = [];
    index.match(TEXT, undefined, workers, out);
    expect(out).toEqual([80, 0]);
    expect(index.sourceOf("a")).toBe("precise");
  });

  it("falls back to the approximate tree for a worker whose stream is not live", async () => {
    const { index, precise, source } = setup();
    store(precise, "a", 5);
    index.insert("b", undefined, TEXT.slice(0, 40));
    source.live.delete("b");
    await index.prepare(request, workers);
    const out: number[] = [];
    index.match(TEXT, undefined, workers, out);
    expect(out).toEqual([80, 40]);
    expect(index.sourceOf("b")).toBe("approx");
  });

  it("routes approximately when tokens miss the budget, and precisely once they arrive", async () => {
    const { index, precise, source, misses } = setup(5);
    store(precise, "a", 10);
    source.delayMs = 100;
    await index.prepare(request, workers);
    const out: number[] = [];
    index.match(TEXT, undefined, workers, out);
    expect(out).toEqual([0, 0]);
    expect(index.sourceOf("a")).toBe("approx");
    expect(misses).toEqual(["timeout"]);
    await new Promise((r) => setTimeout(r, 150));
    expect(index.prepare(request, workers)).toBeUndefined(); // cached now: no await at all
    index.match(TEXT, undefined, workers, out);
    expect(out).toEqual([160, 0]);
  });

  it("regression: a request routed before its tokens came gets its speculative entries when they come", async () => {
    const { index, precise, source } = setup(5);
    source.delayMs = 50;
    await index.prepare(request, workers); // the budget runs out: routed approximately
    index.insert("b", undefined, TEXT);
    index.insert("a", undefined, TEXT);
    index.truncate("a", undefined, TEXT, 0); // a did not accept it
    const keys = blockKeys(TOKENS, BS, "");
    expect(precise.matchBlocks("b", keys)).toBe(0);
    await new Promise((r) => setTimeout(r, 120));
    // Without these, the next requests with this prefix would not know b is about to hold it.
    expect(precise.matchBlocks("b", keys)).toBe(10);
    expect(precise.matchBlocks("a", keys)).toBe(0);
  });

  it("insert holds the blocks speculatively; truncate withdraws what the worker did not accept", async () => {
    const { index, precise } = setup();
    await index.prepare(request, workers);
    index.insert("b", undefined, TEXT);
    const keys = blockKeys(TOKENS, BS, "");
    expect(precise.matchBlocks("b", keys)).toBe(10);
    index.truncate("b", undefined, TEXT, 32); // keep 20% = 2 blocks
    expect(precise.matchBlocks("b", keys)).toBe(2);
  });

  it("does nothing asynchronous for requests without tokenizer input", () => {
    const { index, source } = setup();
    expect(index.prepare({ text: TEXT }, workers)).toBeUndefined();
    expect(source.calls).toBe(0);
  });

  it("charsFor never splits a surrogate pair", () => {
    const text = "ab😀cd";
    expect(charsFor(text, 0.5)).toBe(2);
    expect(charsFor(text, 1)).toBe(text.length);
    expect(charsFor(text, 0)).toBe(0);
  });
});

describe("HybridIndex with data-parallel ranks", () => {
  /** Worker "a" runs 3 ranks, each indexed apart; `load` is this router's in flight per rank. */
  function ranked(load: number[]) {
    const { index, precise, source } = setup();
    const ranks = Object.assign(source, {
      ranksOf: (id: string) => (id === "a" ? 3 : 1),
      rankLoad: (_id: string, rank: number) => load[rank] ?? 0,
    });
    for (const rank of [1, 2]) precise.addWorker(rankIndexId("a", rank));
    return { index, precise, source: ranks };
  }

  it("a worker's match is its best rank's, which rankOf names and insert speculates on", async () => {
    const { index, precise } = ranked([0, 0, 0]);
    store(precise, rankIndexId("a", 1), 2);
    store(precise, rankIndexId("a", 2), 6);
    await index.prepare(request, workers);
    const out: number[] = [];
    index.match(TEXT, undefined, workers, out);
    expect(out[0]).toBe(charsFor(TEXT, 24 / 40));
    expect(index.rankOf("a")).toBe(2);
    expect(index.rankOf("b")).toBeUndefined();
    index.insert("a", undefined, TEXT);
    expect(precise.speculativeCount(rankIndexId("a", 2))).toBe(4);
    expect(precise.speculativeCount("a")).toBe(0);
  });

  it("ranks holding as much go to the one with the fewest requests in flight", async () => {
    const { index, precise } = ranked([5, 1, 3]);
    for (const rank of [0, 1, 2]) store(precise, rankIndexId("a", rank), 3);
    await index.prepare(request, workers);
    index.match(TEXT, undefined, workers, []);
    expect(index.rankOf("a")).toBe(1);
  });

  it("no rank is named while the worker routes approximately", async () => {
    const { index, source } = ranked([0, 0, 0]);
    await index.prepare(request, workers);
    index.match(TEXT, undefined, workers, []);
    expect(index.rankOf("a")).toBe(0);
    source.live.delete("a");
    index.match(TEXT, undefined, workers, []);
    expect(index.rankOf("a")).toBeUndefined();
  });
});

// Issue 20, item 9: with /tokenize slower than the budget, chats that share a system prompt but
// end differently missed the tokenizer cache and routed as a tie. The real TokenizerClient and
// the simulator's /tokenize, each answer held back 100 ms (a busy engine), the budget 20 ms.
describe("HybridIndex with a slow /tokenize", () => {
  it("routes a new question after a known system prompt precisely on the system prompt's blocks", async () => {
    const sim = await startSimWorker({ timeScale: 0 });
    const pool = new Pool(sim.url);
    try {
      const client = new TokenizerClient({
        requestTimeoutMs: 5000,
        maxCachedTokens: 100_000,
        maxTokens: 100_000,
      });
      const target = { pool, basePath: "", authorization: undefined };
      const source: TokenSource = {
        isLive: () => true,
        cached: (model, input) => client.known(model, input)?.tokens,
        cachedPrefix: (model, input) => client.knownPrefix(model, input),
        tokenize: async (_ids, model, input) => {
          await new Promise((resolve) => setTimeout(resolve, 100));
          return client.tokenize(target, model, input);
        },
      };
      const precise = new PreciseIndex({ maxBlocksPerWorker: 10_000, speculativeTtlMs: 1 });
      const misses: string[] = [];
      const index = new HybridIndex(new ApproximateIndex(), precise, source, {
        tokenizeBudgetMs: 20,
        defaultBlockSize: BS,
        onTokenizeMiss: (r) => misses.push(r),
      });
      for (const w of workers) index.addWorker(w.id);
      const system = { role: "system", content: "You are a terse assistant.\n".repeat(8) };
      // Worker a's engine holds the system prompt's blocks.
      const held = tokenize(renderChat([system], false));
      const blocks = Math.floor(held.length / BS);
      precise.apply("a", {
        type: "BlockStored",
        blockHashes: Array.from({ length: blocks }, (_, i) => `s${i}`),
        parentHash: null,
        tokenIds: held.slice(0, blocks * BS),
        blockSize: BS,
        loraId: null,
        medium: null,
        loraName: null,
      });
      const ask = async (question: string) => {
        const messages = [system, { role: "user", content: question }];
        const text = renderChat(messages);
        await index.prepare({ text, model: undefined, tokenizeInput: { messages } }, workers);
        const out: number[] = [];
        index.match(text, undefined, workers, out);
        return { out, text };
      };
      await ask("What is a radix tree?");
      expect(misses).toEqual(["timeout"]);
      // Its tokens, and the system messages' own, arrive after the budget.
      await new Promise((resolve) => setTimeout(resolve, 300));
      const { out, text } = await ask("And a block hash?");
      expect(misses).toEqual(["timeout", "prefix"]);
      expect(index.sourceOf("a")).toBe("precise");
      expect(out[1]).toBe(0);
      // About the system prompt's share of the text.
      expect(out[0]).toBeGreaterThan(text.length * 0.5);
      expect(out[0]).toBeLessThan(text.length);
    } finally {
      await pool.close();
      await sim.close();
    }
  });
});

describe("HybridIndex: a chat with media", () => {
  it("matches precisely up to the first media; past it the approximate trees (image digests) may say more", async () => {
    const { index, precise, source } = setup();
    // The messages before the image are the first 20 tokens, half of the routing text.
    source.cached = (_model: string | undefined, input: TokenizeInput) =>
      "leadingMessages" in input ? TOKENS.slice(0, 20) : undefined;
    store(precise, "a", 10);
    // b was sent this very request (its image included): its tree holds the whole text.
    index.insert("b", undefined, TEXT);
    const media = { leadingMessages: [{ role: "system", content: "s" }], share: 0.5 };
    expect(index.prepare({ text: TEXT, model: undefined, tokenizeInput: media }, workers)).toBe(
      undefined,
    );
    const out: number[] = [];
    index.match(TEXT, undefined, workers, out);
    // a holds every block of the leading messages, and is credited with their share only.
    expect(out).toEqual([80, 160]);
    expect(index.sourceOf("a")).toBe("precise");
    expect(index.sourceOf("b")).toBe("approx");
  });
});

// Regression: with --cache-isolation tenant and --kv-events, the precise index keyed a salted
// request on the unsalted root, and dropped the salt of the engine's blocks: one tenant's match
// read another's blocks (and the match= value, a hit's route, told it what the other had sent).
describe("HybridIndex under tenants' cache salts", () => {
  const alice = "rg-aaaaaaaaaaaaaaaaaaaaaaaa";
  const bob = "rg-bbbbbbbbbbbbbbbbbbbbbbbb";

  /** Worker a's engine stores TOKENS' 5 first blocks for a request salted with `salt`, as vLLM publishes it. */
  function storeSalted(precise: PreciseIndex, salt: string | undefined) {
    const extra = Array.from({ length: 5 }, (_, i) => (i === 0 && salt ? [salt] : null));
    const batch = decodeBatch(
      encodeBatch(
        {
          ts: 1,
          events: [
            {
              type: "BlockStored",
              blockHashes: [1, 2, 3, 4, 5],
              parentHash: null,
              tokenIds: TOKENS.slice(0, 5 * BS),
              blockSize: BS,
              medium: "GPU",
              loraName: null,
              extraKeys: extra,
            },
          ],
        },
        "map",
      ),
    );
    for (const event of batch.events) precise.apply("a", event);
  }

  async function matchedFor(index: HybridIndex, salt: string | undefined) {
    const model = saltedKey(undefined, salt);
    await index.prepare({ ...request, model }, workers);
    const out: number[] = [];
    index.match(TEXT, model, workers, out);
    return out[0];
  }

  it("a tenant's request matches its own blocks only: never another tenant's, nor unsalted ones", async () => {
    const { index, precise } = setup();
    storeSalted(precise, alice);
    expect(await matchedFor(index, alice)).toBe(80);
    expect(await matchedFor(index, bob)).toBe(0);
    expect(await matchedFor(index, undefined)).toBe(0);
    const other = setup();
    storeSalted(other.precise, undefined);
    expect(await matchedFor(other.index, undefined)).toBe(80);
    expect(await matchedFor(other.index, alice)).toBe(0);
  });

  it("a salted adapter's key still finds the adapter", () => {
    const { precise } = setup();
    precise.apply("a", {
      type: "BlockStored",
      blockHashes: ["x"],
      parentHash: null,
      tokenIds: TOKENS.slice(0, BS),
      blockSize: BS,
      loraId: null,
      medium: null,
      loraName: "sql",
    });
    expect(precise.loraFor("a", saltedKey("sql", alice))).toBe("sql");
    expect(splitSalted(saltedKey("sql", alice))).toEqual({ salt: alice, key: "sql" });
    expect(splitSalted("rg-not-a-salt/sql")).toEqual({ salt: undefined, key: "rg-not-a-salt/sql" });
  });
});
