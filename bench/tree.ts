/**
 * Routing-core micro-benchmark for the per-worker radix tree.
 *
 *   npx tsx bench/tree.ts            (npm run bench:tree)
 *   node --expose-gc --import tsx bench/tree.ts
 *
 * 1. One cache_aware decision: match the prompt against every worker's tree, pick the best match
 *    (match rate > 0.5) else the worker with the fewest inserted characters, insert into it.
 * 2. Heap bytes per cached character at 1M and 16M characters (heapUsed delta after a full gc).
 * 3. Time to evict a 16M-character tree (and one of the default 2^26) down to half, and the one
 *    insert that triggers a reactive eviction in a tree at the default budget.
 *
 * The gc is --expose-gc's when given, else switched on at run time (v8.setFlagsFromString), so
 * plain `npm run bench:tree` measures memory the same way.
 *
 * 4. The prefix indexes (bench/lib/index-bench.ts): one decision through the PrefixIndex interface,
 *    approx, shared and block_hash, for 8k prompts at 16, 64 and 256 workers; heap per claimed character
 *    (a prefix held by two workers counts twice); evicting half of a 2^26-character shared index
 *    in the timer's slices (total and longest slice).
 *
 * Prints tables and writes bench/results/tree.json. Seeded: every run draws the same requests.
 * Environment: BENCH_QUICK=1 for a fast smoke run with fewer samples; BENCH_PART=index runs only
 * part 4, BENCH_PART=tree only parts 1-3; BENCH_INDEX_KINDS=block_hash,shared limits part 4's indexes.
 */

import { mkdirSync, writeFileSync } from "node:fs";
import os from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import v8 from "node:v8";
import vm from "node:vm";
import { mulberry32 } from "../sim/prng.js";
import { RadixTree } from "../src/tree/radix-tree.js";
import {
  benchIndexDecision,
  benchIndexMemory,
  benchSlicedEvict,
  INDEX_KINDS,
  type IndexDecisionResult,
  type IndexKind,
  type IndexMemoryResult,
  type SlicedEvictResult,
} from "./lib/index-bench.js";
import { type Script, Workload, words } from "./lib/prompts.js";
import { printTable, type Summary, summarize } from "./lib/stats.js";

const QUICK = process.env.BENCH_QUICK === "1";
const PART = process.env.BENCH_PART ?? "all";
const INDEX_WORKER_COUNTS = [16, 64, 256];
/** BENCH_INDEX_KINDS=shared,block_hash runs part 4 for those indexes only. */
const INDEX_KINDS_RUN: readonly IndexKind[] = (
  process.env.BENCH_INDEX_KINDS ?? INDEX_KINDS.join(",")
)
  .split(",")
  .filter((k): k is IndexKind => (INDEX_KINDS as readonly string[]).includes(k));
const INDEX_PROMPT_CHARS = 8192;
const INDEX_MEMORY = { workers: 16, chars: QUICK ? 2_000_000 : 16_000_000 };
const INDEX_EVICT_CHARS = QUICK ? 2_000_000 : 2 ** 26;
const PROMPT_SIZES = [1024, 8192, 32768];
const WORKER_COUNTS = [4, 16, 64];
const ROUNDS = QUICK ? 1 : 3;
const WARMUP_DECISIONS = QUICK ? 100 : 2000;
const MEASURED_DECISIONS = QUICK ? 300 : 5000;
const CACHE_THRESHOLD = 0.5;
/** Share of decision-bench conversations/prompts in CJK (two-byte strings), as in mixed traffic. */
const CJK_SHARE = 0.1;
const MEMORY_POINTS: { chars: number; script: Script }[] = QUICK
  ? [{ chars: 1_000_000, script: "ascii" }]
  : [
      { chars: 1_000_000, script: "ascii" },
      { chars: 16_000_000, script: "ascii" },
      { chars: 1_000_000, script: "cjk" },
    ];
/** Tree sizes to evict down to half: 16M three times, then one tree of the default budget (2^26). */
const EVICT_TREES = QUICK ? [2_000_000] : [16_000_000, 16_000_000, 16_000_000, 2 ** 26];

/** A full gc: --expose-gc's global, else the same function switched on at run time. */
function findGc(): { gc: (() => void) | null; mode: string } {
  const g = (globalThis as { gc?: () => void }).gc;
  if (typeof g === "function") return { gc: g, mode: "--expose-gc" };
  try {
    v8.setFlagsFromString("--expose-gc");
    const fn = vm.runInNewContext("gc") as unknown;
    if (typeof fn === "function") return { gc: fn as () => void, mode: "v8.setFlagsFromString" };
  } catch {
    // fall through: no forced gc
  }
  return { gc: null, mode: "none (memory figures approximate)" };
}

const { gc, mode: gcMode } = findGc();

/** The JS heap plus ArrayBuffer memory (block_hash keeps its blocks in typed arrays, off-heap). */
function settledHeap(): number {
  if (gc !== null) {
    gc();
    gc();
  }
  const { heapUsed, arrayBuffers } = process.memoryUsage();
  return heapUsed + arrayBuffers;
}

/** One round of one configuration: raw nanosecond samples. */
interface DecisionRun {
  textChars: number;
  hits: number;
  matchRateSum: number;
  total: number[];
  matchAll: number[];
  insert: number[];
  /** Characters held by all trees together at the end. */
  treeChars: number;
}

interface DecisionResult extends Summary {
  promptChars: number;
  workers: number;
  rounds: number;
  meanTextChars: number;
  cacheHitRate: number;
  meanMatchRate: number;
  /** Median of each round on its own, to show the run-to-run spread. */
  roundMediansNs: number[];
  /** The two halves of the same decisions, timed apart. */
  matchAll: Summary;
  insert: Summary;
  treeChars: number;
}

function benchDecision(promptChars: number, workers: number, seed: number): DecisionRun {
  const rng = mulberry32(seed);
  const workload = new Workload(rng, { promptChars, cjkShare: CJK_SHARE });
  const trees = Array.from({ length: workers }, () => new RadixTree());
  const inserted = new Array<number>(workers).fill(0);
  let best = -1;
  let bestIdx = 0;

  const matchAll = (text: string): void => {
    best = -1;
    bestIdx = 0;
    for (let i = 0; i < workers; i++) {
      const m = trees[i]!.match(text);
      if (m > best) {
        best = m;
        bestIdx = i;
      }
    }
  };
  const choose = (text: string): number => {
    if (best / text.length > CACHE_THRESHOLD) return bestIdx;
    let chosen = 0;
    for (let i = 1; i < workers; i++) if (inserted[i]! < inserted[chosen]!) chosen = i;
    return chosen;
  };
  const insertInto = (chosen: number, text: string): void => {
    trees[chosen]!.insert(text);
    inserted[chosen]! += text.length;
  };

  for (let i = 0; i < WARMUP_DECISIONS; i++) {
    const text = workload.next();
    matchAll(text);
    insertInto(choose(text), text);
  }

  const total: number[] = [];
  const matchTimes: number[] = [];
  const insertTimes: number[] = [];
  let textChars = 0;
  let hits = 0;
  let matchRateSum = 0;
  for (let i = 0; i < MEASURED_DECISIONS; i++) {
    const text = workload.next();
    const t0 = process.hrtime.bigint();
    matchAll(text);
    const chosen = choose(text);
    const t1 = process.hrtime.bigint();
    insertInto(chosen, text);
    const t2 = process.hrtime.bigint();
    total.push(Number(t2 - t0));
    matchTimes.push(Number(t1 - t0));
    insertTimes.push(Number(t2 - t1));
    textChars += text.length;
    const rate = best / text.length;
    matchRateSum += rate;
    if (rate > CACHE_THRESHOLD) hits++;
  }
  return {
    textChars,
    hits,
    matchRateSum,
    total,
    matchAll: matchTimes,
    insert: insertTimes,
    treeChars: trees.reduce((sum, t) => sum + t.charCount, 0),
  };
}

function combine(promptChars: number, workers: number, runs: DecisionRun[]): DecisionResult {
  const count = runs.length * MEASURED_DECISIONS;
  const sum = (f: (r: DecisionRun) => number): number => runs.reduce((acc, r) => acc + f(r), 0);
  return {
    promptChars,
    workers,
    rounds: runs.length,
    meanTextChars: Math.round(sum((r) => r.textChars) / count),
    cacheHitRate: sum((r) => r.hits) / count,
    meanMatchRate: sum((r) => r.matchRateSum) / count,
    roundMediansNs: runs.map((r) => summarize([...r.total]).medianNs),
    ...summarize(runs.flatMap((r) => r.total)),
    matchAll: summarize(runs.flatMap((r) => r.matchAll)),
    insert: summarize(runs.flatMap((r) => r.insert)),
    treeChars: Math.round(sum((r) => r.treeChars) / runs.length),
  };
}

/** Fills a tree with a realistic mix (4k-char prompts) until it holds at least `chars`. */
function fillTree(tree: RadixTree, chars: number, seed: number, script: Script = "ascii"): number {
  const workload = new Workload(mulberry32(seed), {
    promptChars: 4096,
    liveConversations: 256,
    script,
  });
  let prompts = 0;
  while (tree.charCount < chars) {
    tree.insert(workload.next());
    prompts++;
  }
  return prompts;
}

interface MemoryResult {
  script: Script;
  targetChars: number;
  charCount: number;
  nodeCount: number;
  prompts: number;
  heapBytes: number;
  bytesPerChar: number;
}

function benchMemory(targetChars: number, script: Script, seed: number): MemoryResult {
  const before = settledHeap();
  const tree = new RadixTree({ maxChars: 2 ** 30 });
  const prompts = fillTree(tree, targetChars, seed, script);
  const after = settledHeap();
  const result = {
    script,
    targetChars,
    charCount: tree.charCount,
    nodeCount: tree.nodeCount,
    prompts,
    heapBytes: after - before,
    bytesPerChar: (after - before) / tree.charCount,
  };
  // Keep the tree reachable until after the measurement.
  if (tree.match(words(mulberry32(1), 8)) < 0) throw new Error("unreachable");
  return result;
}

interface EvictResult {
  charCount: number;
  nodeCount: number;
  targetChars: number;
  evictedChars: number;
  nodesAfter: number;
  ms: number;
}

/** Runs evict on small trees first so the timed run measures compiled code, not the JIT. */
function warmEvict(): void {
  for (let i = 0; i < 20; i++) {
    const tree = new RadixTree({ maxChars: 2 ** 30 });
    fillTree(tree, 200_000, 300 + i);
    tree.evict(tree.charCount / 2);
    tree.evict(0);
  }
}

function benchEvict(chars: number, seed: number): EvictResult {
  const tree = new RadixTree({ maxChars: 2 ** 30 });
  fillTree(tree, chars, seed);
  settledHeap();
  const charCount = tree.charCount;
  const nodeCount = tree.nodeCount;
  const target = Math.floor(charCount / 2);
  const start = process.hrtime.bigint();
  const evictedChars = tree.evict(target);
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  return {
    charCount,
    nodeCount,
    targetChars: target,
    evictedChars,
    nodesAfter: tree.nodeCount,
    ms,
  };
}

interface ReactiveResult {
  maxChars: number;
  charsBefore: number;
  evictedChars: number;
  charsAfter: number;
  /** The insert that crossed the high-water mark (eviction included). */
  insertMs: number;
  /** Median of the other inserts into the same tree, for comparison. */
  otherInsertMedianUs: number;
}

/** Fills a tree with the default options until an insert crosses the high-water mark. */
function benchReactive(seed: number): ReactiveResult {
  let evictedChars = 0;
  const tree = new RadixTree({
    onEvict: (n) => {
      evictedChars = n;
    },
  });
  const workload = new Workload(mulberry32(seed), { promptChars: 4096, liveConversations: 256 });
  const others: number[] = [];
  for (;;) {
    const text = workload.next();
    const charsBefore = tree.charCount;
    const start = process.hrtime.bigint();
    tree.insert(text);
    const ns = Number(process.hrtime.bigint() - start);
    if (evictedChars > 0) {
      return {
        maxChars: tree.maxChars,
        charsBefore,
        evictedChars,
        charsAfter: tree.charCount,
        insertMs: ns / 1e6,
        otherInsertMedianUs: summarize(others).medianNs / 1000,
      };
    }
    others.push(ns);
  }
}

function us(ns: number): string {
  return (ns / 1000).toFixed(2);
}

interface IndexPart {
  decisions: IndexDecisionResult[];
  memory: IndexMemoryResult[];
  evict: SlicedEvictResult[];
  approxEvict: EvictResult;
}

function indexPart(): IndexPart {
  const memory = INDEX_KINDS_RUN.map((kind) => {
    const result = benchIndexMemory(kind, INDEX_MEMORY.workers, INDEX_MEMORY.chars, settledHeap);
    settledHeap();
    return result;
  });
  console.log(
    `\nPrefix index heap per claimed character (${INDEX_MEMORY.workers} workers, 4k-prompt mix routed by the decision below)`,
  );
  printTable(
    ["index", "workers", "claimed chars", "heap MB", "bytes/claimed char"],
    memory.map((m) => [
      m.kind,
      m.workers,
      m.claimedChars,
      (m.heapBytes / 2 ** 20).toFixed(1),
      m.bytesPerClaimedChar.toFixed(3),
    ]),
  );

  const decisions: IndexDecisionResult[] = [];
  for (const workers of INDEX_WORKER_COUNTS) {
    for (const kind of INDEX_KINDS_RUN) {
      decisions.push(
        benchIndexDecision(
          kind,
          INDEX_PROMPT_CHARS,
          workers,
          ROUNDS,
          WARMUP_DECISIONS,
          MEASURED_DECISIONS,
          CJK_SHARE,
        ),
      );
      settledHeap();
    }
  }
  console.log(
    `\nOne decision through the PrefixIndex (match all candidates + insert one), ${INDEX_PROMPT_CHARS}-char prompts: ${ROUNDS} rounds x ${MEASURED_DECISIONS} samples after ${WARMUP_DECISIONS} warm-up decisions`,
  );
  printTable(
    ["index", "workers", "hit rate", "median µs", "p99 µs", "mean µs", "round medians µs"],
    decisions.map((d) => [
      d.kind,
      d.workers,
      d.cacheHitRate.toFixed(3),
      us(d.medianNs),
      us(d.p99Ns),
      us(d.meanNs),
      d.roundMediansNs.map((ns) => (ns / 1000).toFixed(1)).join(" "),
    ]),
  );

  benchSlicedEvict(4, 400_000); // warm the eviction code
  const evict = [1, 16].map((workers) => {
    const result = benchSlicedEvict(workers, INDEX_EVICT_CHARS);
    settledHeap();
    return result;
  });
  console.log("\nShared index: evict half of every worker's characters, in the timer's slices");
  printTable(
    [
      "workers",
      "claimed before",
      "claimed after",
      "slices",
      "total ms",
      "cpu ms",
      "median slice ms",
      "longest slice ms",
      "longest slice cpu ms",
    ],
    evict.map((e) => [
      e.workers,
      e.claimedBefore,
      e.claimedAfter,
      e.slices,
      e.totalMs.toFixed(2),
      e.cpuMs.toFixed(2),
      e.medianSliceMs.toFixed(2),
      e.longestSliceMs.toFixed(2),
      e.longestSliceCpuMs.toFixed(2),
    ]),
  );
  // The same half eviction in the per-worker tree, done at once (the timer's unit is a whole tree).
  warmEvict();
  const approxEvict = benchEvict(INDEX_EVICT_CHARS, 200);
  console.log(
    `approx (one tree) for comparison: ${approxEvict.charCount} → ${approxEvict.charCount - approxEvict.evictedChars} chars in one call, ${approxEvict.ms.toFixed(2)} ms`,
  );
  return { decisions, memory, evict, approxEvict };
}

function main(): void {
  const started = Date.now();
  console.log(
    `bench:tree — node ${process.version}, ${os.cpus().length} cpus, gc: ${gcMode}${QUICK ? ", QUICK" : ""}`,
  );
  if (PART === "index") {
    const index = indexPart();
    writeResults("tree-index.json", { seconds: (Date.now() - started) / 1000, index });
    return;
  }

  // Memory first, on a fresh heap, then the decision and eviction timings.
  const memory = MEMORY_POINTS.map((p, i) => benchMemory(p.chars, p.script, 100 + i));
  console.log("\nHeap per cached character (realistic prompt mix of 4k-char prompts)");
  printTable(
    ["text", "target chars", "charCount", "nodes", "prompts", "heap MB", "bytes/char"],
    memory.map((m) => [
      m.script,
      m.targetChars,
      m.charCount,
      m.nodeCount,
      m.prompts,
      (m.heapBytes / 2 ** 20).toFixed(1),
      m.bytesPerChar.toFixed(3),
    ]),
  );

  // Rounds interleave the configurations (fresh trees and seeds each time), so that a noisy
  // moment of the machine does not land on one configuration only.
  const configs = PROMPT_SIZES.flatMap((size) =>
    WORKER_COUNTS.map((workers) => ({ size, workers })),
  );
  const runs = configs.map((): DecisionRun[] => []);
  for (let round = 0; round < ROUNDS; round++) {
    configs.forEach((c, i) => {
      runs[i]!.push(benchDecision(c.size, c.workers, 1000 * round + i + 1));
      settledHeap();
    });
  }
  const decisions = configs.map((c, i) => combine(c.size, c.workers, runs[i]!));
  console.log(
    `\nOne cache_aware decision (match all trees + insert one): ${ROUNDS} rounds x ${MEASURED_DECISIONS} samples, each after ${WARMUP_DECISIONS} warm-up decisions; ${CJK_SHARE * 100}% of texts CJK`,
  );
  printTable(
    [
      "prompt",
      "workers",
      "mean chars",
      "hit rate",
      "match rate",
      "median µs",
      "p99 µs",
      "mean µs",
      "round medians µs",
      "match-all med",
      "insert med",
      "insert p99",
      "tree Mchars",
    ],
    decisions.map((d) => [
      d.promptChars,
      d.workers,
      d.meanTextChars,
      d.cacheHitRate.toFixed(2),
      d.meanMatchRate.toFixed(2),
      us(d.medianNs),
      us(d.p99Ns),
      us(d.meanNs),
      d.roundMediansNs.map((ns) => (ns / 1000).toFixed(1)).join(" "),
      us(d.matchAll.medianNs),
      us(d.insert.medianNs),
      us(d.insert.p99Ns),
      (d.treeChars / 1e6).toFixed(1),
    ]),
  );

  warmEvict();
  const evict: EvictResult[] = [];
  EVICT_TREES.forEach((chars, i) => {
    evict.push(benchEvict(chars, 200 + i));
    settledHeap();
  });
  const reactive = benchReactive(400);
  console.log("\nEvict a full tree down to half (fresh tree each run, evict code warmed up)");
  printTable(
    ["run", "charCount", "nodes", "target", "evicted", "nodes after", "ms"],
    evict.map((e, i) => [
      i + 1,
      e.charCount,
      e.nodeCount,
      e.targetChars,
      e.evictedChars,
      e.nodesAfter,
      e.ms.toFixed(2),
    ]),
  );
  console.log("\nReactive eviction: the insert that crosses maxChars * 1.1 (default options)");
  printTable(
    [
      "maxChars",
      "chars before",
      "evicted",
      "chars after",
      "that insert ms",
      "other inserts med µs",
    ],
    [
      [
        reactive.maxChars,
        reactive.charsBefore,
        reactive.evictedChars,
        reactive.charsAfter,
        reactive.insertMs.toFixed(2),
        reactive.otherInsertMedianUs.toFixed(2),
      ],
    ],
  );

  const index = PART === "tree" ? undefined : indexPart();
  const seconds = (Date.now() - started) / 1000;
  writeResults("tree.json", { seconds, decisions, memory, evict, reactive, index });
}

function writeResults(name: string, results: Record<string, unknown>): void {
  console.log(`\ntotal ${Number(results.seconds).toFixed(1)} s`);
  const out = join(dirname(fileURLToPath(import.meta.url)), "results", name);
  mkdirSync(dirname(out), { recursive: true });
  const header = {
    date: new Date().toISOString(),
    node: process.version,
    cpus: os.cpus().length,
    gcMode,
    quick: QUICK,
  };
  writeFileSync(out, `${JSON.stringify({ ...header, ...results }, null, 2)}\n`);
  console.log(`wrote ${out}`);
}

main();
