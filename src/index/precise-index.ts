/**
 * The precise block index: for each worker, the token blocks its engine reports holding, learned
 * from KV events (src/kv-events/), keyed by the router's own chained block keys (block-keys.ts).
 *
 * - BlockStored brings the engine's hashes with the blocks' tokens: the index computes its own key
 *   for each block from the parent's key and maps engine hash → key, so that a later BlockRemoved
 *   (hashes only) can be applied. A block whose parent it never saw cannot be keyed and is skipped
 *   (counted as an orphan).
 * - Speculative entries: a request routed to the worker will be cached there soon; its blocks are
 *   held speculatively until a BlockStored confirms them or their time-to-live runs out.
 * - Bounded: at most `maxBlocksPerWorker` engine blocks and as many speculative ones per worker,
 *   or fewer when the engine's KV cache holds fewer (`setBlockLimit`); past that the oldest go
 *   first (the engine has most likely evicted them too).
 * - Per model/LoRA and cache salt: the adapter name and the salt seed the chain, so adapters and
 *   tenants (--cache-isolation tenant) never share a key.
 */
import type { BlockStored, KvEvent } from "./block-events.js";
import { GPU_MEDIUM } from "./block-events.js";
import { blockKey, blockKeys, rootKey, withExtraKey } from "./block-keys.js";
import { splitSalted } from "./salted-key.js";

export interface PreciseIndexOptions {
  maxBlocksPerWorker: number;
  speculativeTtlMs: number;
  now?: () => number;
}

/** What applying one event did, for metrics. */
export type ApplyResult = "applied" | "ignored" | "orphan" | "malformed";

interface WorkerBlocks {
  /** Tokens per block, learned from the first BlockStored. */
  blockSize: number | undefined;
  /** Engine hash → our key; Map order = arrival order (oldest first) for the bound. */
  readonly byEngine: Map<string, number>;
  /**
   * Where the bound drops the next block: one iterator over `byEngine` kept for the worker's
   * life. A fresh `keys().next()` walks past every deleted slot before the first live entry,
   * so trimming k blocks that way costs O(k²): 400k → 262,144 blocks took 5.9 s (issue 20).
   * A kept iterator resumes where it stopped, and Map iterators see deletions and later
   * insertions, so it always yields the oldest block still held: O(1) per dropped block.
   */
  oldest: Iterator<string>;
  /** Our key → how many engine blocks map to it. */
  readonly held: Map<number, number>;
  /** Our key → expiry (ms) of a speculative entry not yet confirmed. */
  readonly speculative: Map<number, number>;
  /** Adapter names seen in this worker's events. */
  readonly loras: Set<string>;
  /** Most engine (and speculative) blocks kept: maxBlocksPerWorker, or the cache's size if less. */
  limit: number;
}

export class PreciseIndex {
  private readonly workers = new Map<string, WorkerBlocks>();
  private readonly now: () => number;
  private totalBlocks = 0;

  constructor(private readonly options: PreciseIndexOptions) {
    this.now = options.now ?? Date.now;
  }

  addWorker(workerId: string): void {
    if (this.workers.has(workerId)) return;
    const byEngine = new Map<string, number>();
    this.workers.set(workerId, {
      blockSize: undefined,
      byEngine,
      oldest: byEngine.keys(),
      held: new Map(),
      speculative: new Map(),
      loras: new Set(),
      limit: this.options.maxBlocksPerWorker,
    });
  }

  /**
   * The worker's (a rank's) KV cache holds at most `blocks` blocks: keep no more than that (nor
   * more than maxBlocksPerWorker); undefined = not known, back to maxBlocksPerWorker. Blocks past
   * the new limit are dropped at once, oldest first, each in O(1).
   */
  setBlockLimit(workerId: string, blocks: number | undefined): void {
    const w = this.workers.get(workerId);
    if (w === undefined) return;
    const max = this.options.maxBlocksPerWorker;
    w.limit =
      blocks === undefined || !Number.isFinite(blocks)
        ? max
        : Math.max(1, Math.min(max, Math.ceil(blocks)));
    while (w.byEngine.size > w.limit) this.dropOldest(w);
    this.sweep(w);
  }

  /** The most engine blocks kept for the worker (see `setBlockLimit`). */
  blockLimitOf(workerId: string): number | undefined {
    return this.workers.get(workerId)?.limit;
  }

  removeWorker(workerId: string): void {
    this.clear(workerId);
    this.workers.delete(workerId);
  }

  /** Forgets everything the worker's engine reported (a restart, a gap that replay cannot fill). */
  clear(workerId: string): void {
    const w = this.workers.get(workerId);
    if (w === undefined) return;
    this.totalBlocks -= w.byEngine.size;
    w.byEngine.clear();
    w.oldest = w.byEngine.keys();
    w.held.clear();
    w.speculative.clear();
  }

  apply(workerId: string, event: KvEvent): ApplyResult {
    const w = this.workers.get(workerId);
    if (w === undefined) return "ignored";
    switch (event.type) {
      case "AllBlocksCleared":
        this.clear(workerId);
        return "applied";
      case "BlockRemoved": {
        if (!onGpu(event.medium)) return "ignored";
        for (const hash of event.blockHashes) this.dropEngineBlock(w, hash);
        return "applied";
      }
      case "BlockStored":
        return this.store(w, event);
    }
  }

  private store(w: WorkerBlocks, event: BlockStored): ApplyResult {
    if (!onGpu(event.medium)) return "ignored";
    const { blockHashes, tokenIds, blockSize } = event;
    if (tokenIds.length !== blockHashes.length * blockSize) return "malformed";
    const lora = event.loraName ?? (event.loraId !== null ? String(event.loraId) : "");
    let parent: number | undefined =
      event.parentHash === null
        ? rootKey(lora, event.cacheSalt ?? undefined)
        : w.byEngine.get(event.parentHash);
    if (parent === undefined) return "orphan";
    if (lora !== "") w.loras.add(lora);
    w.blockSize = blockSize;
    for (let i = 0; i < blockHashes.length; i++) {
      const plain = blockKey(parent, tokenIds, i * blockSize, (i + 1) * blockSize);
      const extra = event.mediaKeys?.[i];
      const key = extra == null ? plain : withExtraKey(plain, extra);
      const hash = blockHashes[i]!;
      if (!w.byEngine.has(hash)) {
        w.byEngine.set(hash, key);
        w.held.set(key, (w.held.get(key) ?? 0) + 1);
        this.totalBlocks++;
      }
      w.speculative.delete(key);
      parent = key;
    }
    while (w.byEngine.size > w.limit) this.dropOldest(w);
    return "applied";
  }

  private dropOldest(w: WorkerBlocks): void {
    let next = w.oldest.next();
    // Done only once the map was empty when last asked; a new iterator sees what came since.
    if (next.done === true) {
      w.oldest = w.byEngine.keys();
      next = w.oldest.next();
    }
    if (next.done !== true) this.dropEngineBlock(w, next.value);
  }

  private dropEngineBlock(w: WorkerBlocks, hash: string): void {
    const key = w.byEngine.get(hash);
    if (key === undefined) return;
    w.byEngine.delete(hash);
    this.totalBlocks--;
    const refs = (w.held.get(key) ?? 1) - 1;
    if (refs <= 0) w.held.delete(key);
    else w.held.set(key, refs);
  }

  /** Tokens per block for the worker, once its engine has said. */
  blockSizeOf(workerId: string): number | undefined {
    return this.workers.get(workerId)?.blockSize;
  }

  /**
   * The adapter a request for `model` (an index key, under a tenant's salt or not) hits on this
   * worker: the model if it is one of its LoRAs.
   */
  loraFor(workerId: string, model: string | undefined): string {
    const key = splitSalted(model).key;
    return key !== undefined && this.workers.get(workerId)?.loras.has(key) ? key : "";
  }

  /** Leading blocks of `keys` the worker holds (confirmed, or speculative and not expired). */
  matchBlocks(workerId: string, keys: readonly number[]): number {
    const w = this.workers.get(workerId);
    if (w === undefined) return 0;
    const now = this.now();
    let n = 0;
    for (; n < keys.length; n++) {
      const key = keys[n]!;
      if (w.held.has(key)) continue;
      const expiry = w.speculative.get(key);
      if (expiry === undefined || expiry <= now) break;
    }
    return n;
  }

  /** The worker is about to cache these blocks: hold them speculatively for the TTL. */
  speculate(workerId: string, keys: readonly number[]): void {
    const w = this.workers.get(workerId);
    if (w === undefined) return;
    const now = this.now();
    const ttl = this.options.speculativeTtlMs;
    const expiry = now + ttl;
    for (const key of keys) {
      if (w.held.has(key)) continue;
      // A fresh entry is left alone: re-setting every key of every hot prefix churns the Map.
      const current = w.speculative.get(key);
      if (current !== undefined && current - now > ttl / 2) continue;
      // Re-inserting moves the key to the end of the Map: the bound drops the stalest first.
      w.speculative.delete(key);
      w.speculative.set(key, expiry);
    }
    this.sweep(w);
  }

  /** The worker did not accept the request: withdraw its speculative blocks after the first `keep`. */
  withdraw(workerId: string, keys: readonly number[], keep: number): void {
    const w = this.workers.get(workerId);
    if (w === undefined) return;
    for (let i = Math.max(0, keep); i < keys.length; i++) w.speculative.delete(keys[i]!);
  }

  /** Engine blocks held for the worker (speculative ones not counted). */
  blockCount(workerId: string): number {
    return this.workers.get(workerId)?.byEngine.size ?? 0;
  }

  speculativeCount(workerId: string): number {
    return this.workers.get(workerId)?.speculative.size ?? 0;
  }

  /** Engine blocks held for all workers (the size metric). */
  get size(): number {
    return this.totalBlocks;
  }

  /**
   * Keys of a request's tokens for this worker's block size, adapter and the tenant's cache salt
   * (undefined: unknown yet). A salted request's chain starts where the engine's does for that
   * salt, so it matches only blocks stored under it, never another tenant's.
   */
  keysFor(
    workerId: string,
    tokens: readonly number[],
    model: string | undefined,
    blockSize = this.blockSizeOf(workerId),
  ): number[] | undefined {
    if (blockSize === undefined) return undefined;
    return blockKeys(tokens, blockSize, this.loraFor(workerId, model), splitSalted(model).salt);
  }

  /** Drops expired speculative entries (oldest first) and keeps the map within its bound. */
  private sweep(w: WorkerBlocks): void {
    const now = this.now();
    for (const [key, expiry] of w.speculative) {
      if (expiry > now && w.speculative.size <= w.limit) break;
      w.speculative.delete(key);
    }
  }
}

/** Only the GPU cache counts for prefix routing; a block offloaded elsewhere is reported apart. */
function onGpu(medium: string | null): boolean {
  return medium === null || medium === GPU_MEDIUM;
}
