/**
 * The prefix-index part of bench:tree: one decision through the PrefixIndex interface, approx
 * (a tree per worker) against shared (one tree whose nodes record their workers) and block_hash
 * (chained hashes of 64-character blocks, an LRU per worker), at fleet sizes up to 256; heap per
 * claimed character; a large eviction in slices.
 */

import { mulberry32 } from "../../sim/prng.js";
import { ApproximateIndex } from "../../src/index/approximate-index.js";
import { BlockHashIndex, DEFAULT_BLOCK_CHARS } from "../../src/index/block-hash-index.js";
import type { PrefixIndex } from "../../src/index/prefix-index.js";
import { SharedIndex } from "../../src/index/shared-index.js";
import { Workload } from "./prompts.js";
import { type Summary, summarize } from "./stats.js";

export const INDEX_KINDS = ["approx", "shared", "block_hash"] as const;
export type IndexKind = (typeof INDEX_KINDS)[number];

const CACHE_THRESHOLD = 0.5;

export function makeIndex(kind: IndexKind, maxTreeSize = 2 ** 30): PrefixIndex {
  switch (kind) {
    case "approx":
      return new ApproximateIndex({ maxTreeSize });
    case "shared":
      return new SharedIndex({ maxTreeSize });
    case "block_hash":
      // GIE's 64-character blocks, the same character budget as the trees.
      return new BlockHashIndex({
        blockChars: DEFAULT_BLOCK_CHARS,
        capacityBlocks: Math.floor(maxTreeSize / DEFAULT_BLOCK_CHARS),
      });
  }
}

/** One cache_aware decision as the decider makes it: match all, pick, insert into the pick. */
class Decider {
  readonly ids: { id: string }[];
  private readonly out: number[];
  private readonly inserted: number[];
  best = 0;

  constructor(
    readonly index: PrefixIndex,
    workers: number,
  ) {
    this.ids = Array.from({ length: workers }, (_, i) => ({ id: `http://worker-${i}:8000` }));
    for (const w of this.ids) index.addWorker(w.id);
    this.out = new Array<number>(workers).fill(0);
    this.inserted = new Array<number>(workers).fill(0);
  }

  decide(text: string): void {
    const out = this.out;
    this.index.match(text, undefined, this.ids, out);
    let best = -1;
    let chosen = 0;
    for (let i = 0; i < out.length; i++) {
      if (out[i]! > best) {
        best = out[i]!;
        chosen = i;
      }
    }
    this.best = best;
    if (best / text.length <= CACHE_THRESHOLD) {
      chosen = 0;
      const inserted = this.inserted;
      for (let i = 1; i < inserted.length; i++) if (inserted[i]! < inserted[chosen]!) chosen = i;
    }
    this.index.insert(this.ids[chosen]!.id, undefined, text);
    this.inserted[chosen]! += text.length;
  }
}

export interface IndexDecisionResult extends Summary {
  kind: IndexKind;
  promptChars: number;
  workers: number;
  cacheHitRate: number;
  roundMediansNs: number[];
}

/** `rounds` fresh indexes, `warmup` untimed then `measured` timed decisions each. */
export function benchIndexDecision(
  kind: IndexKind,
  promptChars: number,
  workers: number,
  rounds: number,
  warmup: number,
  measured: number,
  cjkShare: number,
): IndexDecisionResult {
  const all: number[] = [];
  const roundMedians: number[] = [];
  let hits = 0;
  for (let round = 0; round < rounds; round++) {
    const workload = new Workload(mulberry32(7000 + round * 31 + workers), {
      promptChars,
      cjkShare,
    });
    const decider = new Decider(makeIndex(kind), workers);
    for (let i = 0; i < warmup; i++) decider.decide(workload.next());
    const samples: number[] = [];
    for (let i = 0; i < measured; i++) {
      const text = workload.next();
      const t0 = process.hrtime.bigint();
      decider.decide(text);
      samples.push(Number(process.hrtime.bigint() - t0));
      if (decider.best / text.length > CACHE_THRESHOLD) hits++;
    }
    all.push(...samples);
    roundMedians.push(summarize(samples).medianNs);
  }
  return {
    kind,
    promptChars,
    workers,
    cacheHitRate: hits / (rounds * measured),
    roundMediansNs: roundMedians,
    ...summarize(all),
  };
}

export interface IndexMemoryResult {
  kind: IndexKind;
  workers: number;
  /** Characters held, summed over workers (a prefix two workers hold counts twice). */
  claimedChars: number;
  heapBytes: number;
  bytesPerClaimedChar: number;
}

/** Routes the 4k-prompt mix through the decision until the workers' claims total `chars`. */
export function benchIndexMemory(
  kind: IndexKind,
  workers: number,
  chars: number,
  settledHeap: () => number,
): IndexMemoryResult {
  const before = settledHeap();
  const decider = new Decider(makeIndex(kind), workers);
  const workload = new Workload(mulberry32(4242), { promptChars: 4096, liveConversations: 256 });
  let claimed = 0;
  while (claimed < chars) {
    decider.decide(workload.next());
    claimed = 0;
    for (const w of decider.ids) claimed += decider.index.size(w.id);
  }
  const heapBytes = settledHeap() - before;
  // Keep the index reachable until after the measurement.
  if (decider.index.size(decider.ids[0]!.id) < 0) throw new Error("unreachable");
  return {
    kind,
    workers,
    claimedChars: claimed,
    heapBytes,
    bytesPerClaimedChar: heapBytes / claimed,
  };
}

export interface SlicedEvictResult {
  workers: number;
  claimedBefore: number;
  claimedAfter: number;
  slices: number;
  totalMs: number;
  longestSliceMs: number;
  medianSliceMs: number;
  /** CPU time of this process over the whole eviction (excludes time the OS ran others). */
  cpuMs: number;
  longestSliceCpuMs: number;
}

/**
 * Fills a shared index to `chars` claimed characters over `workers` workers (no eviction on the
 * way: high water far above), then runs the eviction units the timer would run, one per turn, for
 * a budget of half of each worker's characters; times each slice.
 */
export function benchSlicedEvict(workers: number, chars: number): SlicedEvictResult {
  const perWorker = Math.ceil(chars / workers);
  const index = new SharedIndex({ maxTreeSize: Math.floor(perWorker / 2), highWaterRatio: 4 });
  const decider = new Decider(index, workers);
  const workload = new Workload(mulberry32(99), { promptChars: 4096, liveConversations: 256 });
  const claimed = (): number => decider.ids.reduce((sum, w) => sum + index.size(w.id), 0);
  // Round-robin the texts so every worker fills evenly.
  let turn = 0;
  while (claimed() < chars) {
    for (let i = 0; i < 64; i++) {
      index.insert(decider.ids[turn % workers]!.id, undefined, workload.next());
      turn++;
    }
  }
  const claimedBefore = claimed();
  const sliceNs: number[] = [];
  let longestCpuUs = 0;
  const cpu0 = process.cpuUsage();
  const start = process.hrtime.bigint();
  for (const unit of index.evictionUnits()) {
    const c0 = process.cpuUsage();
    const t0 = process.hrtime.bigint();
    unit.evict();
    sliceNs.push(Number(process.hrtime.bigint() - t0));
    const c = process.cpuUsage(c0);
    longestCpuUs = Math.max(longestCpuUs, c.user + c.system);
  }
  const totalMs = Number(process.hrtime.bigint() - start) / 1e6;
  const cpu = process.cpuUsage(cpu0);
  const summary = summarize(sliceNs);
  return {
    workers,
    claimedBefore,
    claimedAfter: claimed(),
    slices: sliceNs.length,
    totalMs,
    longestSliceMs: summary.maxNs / 1e6,
    medianSliceMs: summary.medianNs / 1e6,
    cpuMs: (cpu.user + cpu.system) / 1000,
    longestSliceCpuMs: longestCpuUs / 1000,
  };
}
