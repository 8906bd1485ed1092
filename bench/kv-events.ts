/**
 * KV-event micro-benchmark (--kv-events, docs/kv-events.md).
 *
 *   npx tsx bench/kv-events.ts            (npm run bench:kv-events)
 *
 * 1. Ingestion: msgpack batches of BlockStored / BlockRemoved events as vLLM publishes them (both
 *    encodings, 16-token blocks, chains of 32 blocks), decoded and applied to the precise index
 *    on one core: events per second, and blocks per second.
 * 2. Extra time per routing decision: one decision's index work (match every worker, insert into
 *    one) through the hybrid index with cached tokens, against the approximate trees alone, for
 *    4k-character prompts at 4, 16 and 64 workers.
 * 3. Tokenizing per request: a prompt of a 4k-character system part and a 512-character question
 *    tokenized in the router (--tokenizer-path; first request of its system part, and a next one
 *    that reuses the cached part), against a call to a simulated worker's /tokenize over HTTP.
 *    The tokenizer.json is BENCH_TOKENIZER when set (e.g. a real model's), else the tiny test one.
 * 4. Tokenizer cache hits on a multi-tenant chat workload (bench/lib/tokenizer-cache-hits.ts):
 *    requests whose tokens are known whole, by a cached prefix (an earlier turn, the system
 *    messages), or not at all, before the worker's /tokenize answers.
 *
 * Prints tables and writes bench/results/kv-events.json. Seeded. BENCH_QUICK=1 for a smoke run.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import os from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Pool } from "undici";
import { encodeBatch, type KvEncoding, type WireEvent } from "../sim/kv-event-encoder.js";
import { mulberry32 } from "../sim/prng.js";
import { writeTinyTokenizer } from "../sim/tiny-tokenizer.js";
import { tokenize } from "../sim/tokenizer.js";
import { startSimWorker } from "../sim/worker.js";
import { ApproximateIndex } from "../src/index/approximate-index.js";
import { HybridIndex, type TokenSource } from "../src/index/hybrid-index.js";
import { PreciseIndex } from "../src/index/precise-index.js";
import type { PrefixIndex } from "../src/index/prefix-index.js";
import { decodeBatch } from "../src/kv-events/decode.js";
import { loadLocalTokenizer } from "../src/kv-events/local-tokenizer.js";
import { TokenizerClient } from "../src/kv-events/tokenizer-client.js";
import { tokenizerCacheHits } from "./lib/tokenizer-cache-hits.js";

const QUICK = process.env.BENCH_QUICK === "1";
const BLOCK = 16;
const CHAIN_BLOCKS = 32;
const BATCHES = QUICK ? 200 : 4000;
const EVENTS_PER_BATCH = 8;
const PROMPT_CHARS = 4096;
const WORKER_COUNTS = [4, 16, 64];
const DECISIONS = QUICK ? 500 : 5000;

const rand = mulberry32(42);

/** 64-bit integer hashes, as engines hashing with a 64-bit builtin publish them. */
const wireHash = (h: number) => BigInt(h) * 0x9e3779b97f4an;

/** Batches of a worker's life: chains stored, some blocks removed, as the engine reports them. */
function makeBatches(encoding: KvEncoding): {
  payloads: Uint8Array[];
  events: number;
  blocks: number;
} {
  const payloads: Uint8Array[] = [];
  let events = 0;
  let blocks = 0;
  let nextHash = 1;
  const live: number[] = [];
  for (let b = 0; b < BATCHES; b++) {
    const batch: WireEvent[] = [];
    for (let e = 0; e < EVENTS_PER_BATCH; e++) {
      if (live.length > 2000 && rand() < 0.3) {
        const hashes = live.splice(0, 8);
        batch.push({ type: "BlockRemoved", blockHashes: hashes.map(wireHash), medium: "GPU" });
        blocks += hashes.length;
      } else {
        const n = 1 + Math.floor(rand() * CHAIN_BLOCKS);
        const hashes = Array.from({ length: n }, () => nextHash++);
        const tokens = Array.from({ length: n * BLOCK }, () => Math.floor(rand() * 128_000));
        batch.push({
          type: "BlockStored",
          blockHashes: hashes.map(wireHash),
          parentHash: null,
          tokenIds: tokens,
          blockSize: BLOCK,
          loraId: null,
          medium: "GPU",
        });
        for (const h of hashes) live.push(h);
        blocks += n;
      }
      events++;
    }
    payloads.push(encodeBatch({ ts: Date.now() / 1000, events: batch }, encoding));
  }
  return { payloads, events, blocks };
}

function ingestion(encoding: KvEncoding) {
  const { payloads, events, blocks } = makeBatches(encoding);
  const bytes = payloads.reduce((n, p) => n + p.length, 0);
  const rounds = QUICK ? 1 : 3;
  let best = Number.POSITIVE_INFINITY;
  for (let r = 0; r < rounds; r++) {
    const index = new PreciseIndex({ maxBlocksPerWorker: 262_144, speculativeTtlMs: 2000 });
    index.addWorker("w");
    const start = process.hrtime.bigint();
    for (const payload of payloads) {
      for (const event of decodeBatch(payload).events) index.apply("w", event);
    }
    const seconds = Number(process.hrtime.bigint() - start) / 1e9;
    best = Math.min(best, seconds);
  }
  return {
    encoding,
    batches: payloads.length,
    events,
    blocks,
    megabytes: bytes / 1e6,
    eventsPerSec: events / best,
    blocksPerSec: blocks / best,
    mbPerSec: bytes / 1e6 / best,
  };
}

/** A token source that always has the tokens and sees every worker live. */
function cachedSource(tokensOf: Map<string, number[]>): TokenSource {
  return {
    isLive: () => true,
    cached: (_m, input) => ("prompt" in input ? tokensOf.get(input.prompt) : undefined),
    tokenize: async () => undefined,
  };
}

function decisionCost(workers: number) {
  const ids = Array.from({ length: workers }, (_, i) => ({ id: `w${i}` }));
  const prompts = Array.from({ length: 64 }, (_, p) => {
    let text = "";
    while (text.length < PROMPT_CHARS)
      text += `conversation ${p} line ${text.length}: some words here\n`;
    return text;
  });
  const tokensOf = new Map(prompts.map((t) => [t, tokenize(t)]));
  const run = (index: PrefixIndex, prepare: boolean) => {
    for (const w of ids) index.addWorker(w.id);
    const out: number[] = new Array(workers).fill(0);
    const once = (i: number) => {
      const text = prompts[i % prompts.length]!;
      if (prepare) index.prepare?.({ text, tokenizeInput: { prompt: text } }, ids);
      index.match(text, undefined, ids, out);
      index.insert(ids[i % workers]!.id, undefined, text);
    };
    for (let i = 0; i < DECISIONS / 5; i++) once(i);
    const start = process.hrtime.bigint();
    for (let i = 0; i < DECISIONS; i++) once(i);
    return Number(process.hrtime.bigint() - start) / 1e3 / DECISIONS;
  };
  const approxUs = run(new ApproximateIndex(), false);
  const precise = new PreciseIndex({ maxBlocksPerWorker: 262_144, speculativeTtlMs: 2000 });
  const hybrid = new HybridIndex(new ApproximateIndex(), precise, cachedSource(tokensOf), {
    tokenizeBudgetMs: 50,
    defaultBlockSize: BLOCK,
  });
  // The engines hold what was routed: store every prompt's blocks on one worker each.
  for (const w of ids) hybrid.addWorker(w.id);
  prompts.forEach((text, p) => {
    const tokens = tokensOf.get(text)!;
    const n = Math.floor(tokens.length / BLOCK);
    precise.apply(ids[p % workers]!.id, {
      type: "BlockStored",
      blockHashes: Array.from({ length: n }, (_, b) => `${p}:${b}`),
      parentHash: null,
      tokenIds: tokens.slice(0, n * BLOCK),
      blockSize: BLOCK,
      loraId: null,
      medium: null,
      loraName: null,
    });
  });
  const hybridUs = run(hybrid, true);
  return { workers, promptChars: PROMPT_CHARS, approxUs, hybridUs, extraUs: hybridUs - approxUs };
}

const ingest = (["array", "map"] as const).map(ingestion);
console.log("\nIngestion (decode + apply, one core)");
console.table(
  ingest.map((r) => ({
    encoding: r.encoding,
    events: r.events,
    blocks: r.blocks,
    "events/s": Math.round(r.eventsPerSec),
    "blocks/s": Math.round(r.blocksPerSec),
    "MB/s": r.mbPerSec.toFixed(1),
  })),
);
const decisions = WORKER_COUNTS.map(decisionCost);
console.log(`\nIndex work per decision, ${PROMPT_CHARS}-character prompts (µs)`);
console.table(
  decisions.map((d) => ({
    workers: d.workers,
    approx: d.approxUs.toFixed(1),
    hybrid: d.hybridUs.toFixed(1),
    extra: d.extraUs.toFixed(1),
  })),
);

const TOKENIZE_REQUESTS = QUICK ? 50 : 500;
const WORDS = "the other line inn later alpha river summit token prefix cache".split(" ");
const words = (chars: number) => {
  let out = "";
  while (out.length < chars) out += `${WORDS[Math.floor(rand() * WORDS.length)]} `;
  return out.slice(0, chars);
};

/** µs per request of each way to get a prompt's tokens. */
async function tokenizeCost() {
  const path = process.env.BENCH_TOKENIZER ?? writeTinyTokenizer();
  const local = loadLocalTokenizer(path);
  const options = { requestTimeoutMs: 5000, maxCachedTokens: 4_000_000, maxTokens: 1 << 20 };
  const systems = Array.from({ length: TOKENIZE_REQUESTS }, () => words(4096));
  const questions = Array.from({ length: TOKENIZE_REQUESTS }, () => words(512));
  const prompt = (i: number, q: number) => `${systems[i]}\n${questions[q]}`;
  const time = (fn: (i: number) => void) => {
    const start = performance.now();
    for (let i = 0; i < TOKENIZE_REQUESTS; i++) fn(i);
    return ((performance.now() - start) * 1000) / TOKENIZE_REQUESTS;
  };
  const client = new TokenizerClient({ ...options, local });
  // First request of each system part: everything is encoded (the head is cached on its way).
  const coldUs = time((i) => client.known(undefined, { prompt: prompt(i, 0) }));
  // Another question after each system part: only the question is encoded.
  const warmUs = time((i) => client.known(undefined, { prompt: prompt(i, 1) }));
  const sim = await startSimWorker({ timeScale: 0, tokenizerPath: path });
  const pool = new Pool(sim.url, { connections: 1 });
  const target = { pool, basePath: "", authorization: undefined };
  const remote = new TokenizerClient(options);
  const start = performance.now();
  for (let i = 0; i < TOKENIZE_REQUESTS; i++) {
    await remote.tokenize(target, undefined, { prompt: prompt(i, 0) });
  }
  const httpUs = ((performance.now() - start) * 1000) / TOKENIZE_REQUESTS;
  await pool.close();
  await sim.close();
  const tokens = local.encode(prompt(0, 0), true).length;
  return {
    tokenizer: process.env.BENCH_TOKENIZER ?? "tiny test tokenizer",
    promptChars: prompt(0, 0).length,
    tokens,
    coldUs,
    warmUs,
    httpUs,
  };
}

const tokenizing = await tokenizeCost();
console.log(
  `\nTokenizing one ${tokenizing.promptChars}-character prompt (${tokenizing.tokens} tokens, ${tokenizing.tokenizer}), µs per request`,
);
console.table([
  {
    "local, new system part": tokenizing.coldUs.toFixed(0),
    "local, system part cached": tokenizing.warmUs.toFixed(0),
    "worker /tokenize over HTTP": tokenizing.httpUs.toFixed(0),
  },
]);

const cacheHits = await tokenizerCacheHits(QUICK);
const pct = (n: number) => `${(100 * n).toFixed(1)}%`;
console.log(
  `\nTokenizer cache on chats: ${cacheHits.requests} requests, ${cacheHits.conversations} conversations under ${cacheHits.systems} system prompts`,
);
console.table([
  {
    "whole request cached": pct(cacheHits.wholeHits / cacheHits.requests),
    "a prefix cached": pct(cacheHits.prefixHits / cacheHits.requests),
    "nothing cached": pct(cacheHits.misses / cacheHits.requests),
    "tokens known, before (whole chats only)": pct(cacheHits.tokensKnownBefore),
    "tokens known, now": pct(cacheHits.tokensKnownAfter),
  },
]);

const out = join(dirname(fileURLToPath(import.meta.url)), "results", "kv-events.json");
mkdirSync(dirname(out), { recursive: true });
writeFileSync(
  out,
  `${JSON.stringify({ date: new Date().toISOString(), cpus: os.cpus().length, quick: QUICK, ingest, decisions, tokenizing, cacheHits }, null, 2)}\n`,
);
console.log(`\nwrote ${out}`);
