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
 * - Tiers (kv-tiers.ts): a block the engine offloaded (vLLM's `medium` "CPU"/"STORAGE") is kept
 *   per tier, each tier a map of its own with its own bound; a block that moves is stored in one
 *   tier and removed from the other, and is gone once removed from every tier. A match is the GPU
 *   run, then the run the engine would load from a lower tier, each block credited at its tier's
 *   weight. Tiers whose weight is 0 are not kept at all (tier-blind: the GPU cache alone).
 */
import type { BlockStored, EngineHash, KvEvent } from "./block-events.js";
import { blockKey, blockKeys, rootKey, withExtraKey } from "./block-keys.js";
import { HASH_UINT, type HashList, HashListBuilder, packed } from "./hash-list.js";
import { Hash64Map } from "./hash64-map.js";
import { GPU_TIER, type KvTier, TIER_COUNT, type TierWeights, tierOf } from "./kv-tiers.js";
import { splitSalted } from "./salted-key.js";

export interface PreciseIndexOptions {
  maxBlocksPerWorker: number;
  speculativeTtlMs: number;
  /** How much a block held on each tier saves of its prefill; absent: the GPU tier alone. */
  tierWeights?: TierWeights;
  now?: () => number;
}

/** What applying one event did, for metrics. */
export type ApplyResult = "applied" | "ignored" | "orphan" | "malformed";

/**
 * The blocks one tier of a worker's engine holds, in typed-array tables (hash64-map.ts): no heap
 * object per block, so a batch of hundreds of thousands of blocks leaves the GC nothing to copy.
 */
interface TierBlocks {
  /**
   * Engine hash (hash-list.ts) → our key, in arrival order: the bound drops the oldest first, in
   * O(1) each (400k → 262,144 blocks took 5.9 s when each drop walked past the deleted ones).
   */
  readonly byEngine: Hash64Map;
  /** Our key (as its two words) → how many engine blocks map to it. */
  readonly held: Hash64Map;
}

interface WorkerBlocks extends TierBlocks {
  /** Tokens per block, learned from the first BlockStored. */
  blockSize: number | undefined;
  /** The offload tiers (CPU, disk) by KvTier, made on their first block; the GPU tier is `this`. */
  readonly lower: (TierBlocks | undefined)[];
  /** Our key → expiry (ms) of a speculative entry not yet confirmed. */
  readonly speculative: Map<number, number>;
  /** Adapter names seen in this worker's events. */
  readonly loras: Set<string>;
  /**
   * Most GPU (and speculative) blocks kept: maxBlocksPerWorker, or the cache's size if less. Each
   * lower tier keeps at most maxBlocksPerWorker.
   */
  limit: number;
}

function newTier(): TierBlocks {
  return { byEngine: new Hash64Map(), held: new Hash64Map() };
}

const TWO_32 = 2 ** 32;

/** Whether a tier holds our key (a 53-bit integer, as its two words). */
function holdsKey(blocks: TierBlocks, key: number): boolean {
  return blocks.held.has(HASH_UINT, Math.floor(key / TWO_32), key >>> 0);
}

/** An event's parent hash, packed into the same arrays each time (the index is synchronous). */
const parentSlot = new HashListBuilder(1);
parentSlot.reserve(1);
function packedParent(hash: EngineHash): HashList {
  parentSlot.setString(0, hash);
  return parentSlot.list(0, 1);
}

export class PreciseIndex {
  private readonly workers = new Map<string, WorkerBlocks>();
  private readonly now: () => number;
  private totalBlocks = 0;
  /** Credit of a block by tier; a tier at 0 is not kept (see `keeps`). */
  private readonly weights: readonly number[];

  constructor(private readonly options: PreciseIndexOptions) {
    this.now = options.now ?? Date.now;
    const w = options.tierWeights;
    this.weights = w === undefined ? [1, 0, 0] : [w.gpu, w.cpu, w.disk];
  }

  /** Whether blocks of this tier are kept: the GPU always, a lower tier when it earns credit. */
  private keeps(tier: KvTier): boolean {
    return tier === GPU_TIER || this.weights[tier]! > 0;
  }

  addWorker(workerId: string): void {
    if (this.workers.has(workerId)) return;
    this.workers.set(workerId, {
      ...newTier(),
      blockSize: undefined,
      lower: [],
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

  /** The most GPU blocks kept for the worker (see `setBlockLimit`). */
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
    w.held.clear();
    for (const tier of w.lower) if (tier !== undefined) this.totalBlocks -= tier.byEngine.size;
    w.lower.length = 0;
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
        const tier = tierOf(event.medium);
        if (!this.keeps(tier)) return "ignored";
        const blocks = this.tier(w, tier, false);
        if (blocks === undefined) return "applied";
        const hashes = packed(event.blockHashes);
        for (let i = 0; i < hashes.length; i++) this.dropEngineBlock(blocks, hashes, i);
        return "applied";
      }
      case "BlockStored":
        return this.store(w, event);
    }
  }

  /** The worker's blocks on `tier`; a lower tier is made on its first block when `make`. */
  private tier(w: WorkerBlocks, tier: KvTier, make: boolean): TierBlocks | undefined {
    if (tier === GPU_TIER) return w;
    let blocks = w.lower[tier];
    if (blocks === undefined && make) {
      blocks = newTier();
      w.lower[tier] = blocks;
    }
    return blocks;
  }

  /** Our key for engine hash i of the list, from whichever tier holds it. */
  private keyOf(w: WorkerBlocks, hashes: HashList, i: number): number | undefined {
    const at = hashes.start + i;
    const kind = hashes.kinds[at]!;
    const hi = hashes.his[at]!;
    const lo = hashes.los[at]!;
    const text = hashes.texts?.[at];
    const key = w.byEngine.get(kind, hi, lo, text);
    if (key !== undefined) return key;
    for (const tier of w.lower) {
      const lower = tier?.byEngine.get(kind, hi, lo, text);
      if (lower !== undefined) return lower;
    }
    return undefined;
  }

  private store(w: WorkerBlocks, event: BlockStored): ApplyResult {
    const tier = tierOf(event.medium);
    if (!this.keeps(tier)) return "ignored";
    const blocks = this.tier(w, tier, true)!;
    const { tokenIds, blockSize } = event;
    const blockHashes = packed(event.blockHashes);
    // vLLM's offloading connector names an offloaded block by its hash alone (no tokens, block
    // size 0) unless its events are self-describing: known only if another tier holds it.
    if (tier !== GPU_TIER && tokenIds.length === 0) return this.storeKnown(w, blocks, blockHashes);
    if (blockSize < 1 || tokenIds.length !== blockHashes.length * blockSize) return "malformed";
    const lora = event.loraName ?? (event.loraId !== null ? String(event.loraId) : "");
    let parent: number | undefined =
      event.parentHash === null
        ? rootKey(lora, event.cacheSalt ?? undefined)
        : this.keyOf(w, packedParent(event.parentHash), 0);
    if (parent === undefined) return "orphan";
    if (lora !== "") w.loras.add(lora);
    w.blockSize = blockSize;
    for (let i = 0; i < blockHashes.length; i++) {
      // A block another tier holds keeps its key (one engine hash, one block): no hashing.
      let key = w.lower.length === 0 ? undefined : this.keyOf(w, blockHashes, i);
      if (key === undefined) {
        const plain = blockKey(parent, tokenIds, i * blockSize, (i + 1) * blockSize);
        const extra = event.mediaKeys?.[i];
        key = extra == null ? plain : withExtraKey(plain, extra);
      }
      this.hold(blocks, blockHashes, i, key);
      if (tier === GPU_TIER) w.speculative.delete(key);
      parent = key;
    }
    this.bound(w, blocks);
    return "applied";
  }

  /** Blocks named by hash alone, each keyed as another tier of the worker knows it. */
  private storeKnown(w: WorkerBlocks, blocks: TierBlocks, hashes: HashList): ApplyResult {
    let known = 0;
    for (let i = 0; i < hashes.length; i++) {
      const key = this.keyOf(w, hashes, i);
      if (key === undefined) continue;
      this.hold(blocks, hashes, i, key);
      known++;
    }
    this.bound(w, blocks);
    return known === 0 && hashes.length > 0 ? "orphan" : "applied";
  }

  private hold(blocks: TierBlocks, hashes: HashList, i: number, key: number): void {
    const at = hashes.start + i;
    const kind = hashes.kinds[at]!;
    const hi = hashes.his[at]!;
    const lo = hashes.los[at]!;
    const text = hashes.texts?.[at];
    if (blocks.byEngine.has(kind, hi, lo, text)) return;
    blocks.byEngine.set(kind, hi, lo, text, key);
    const khi = Math.floor(key / TWO_32);
    const klo = key >>> 0;
    blocks.held.set(
      HASH_UINT,
      khi,
      klo,
      undefined,
      (blocks.held.get(HASH_UINT, khi, klo) ?? 0) + 1,
    );
    this.totalBlocks++;
  }

  private bound(w: WorkerBlocks, blocks: TierBlocks): void {
    const limit = blocks === w ? w.limit : this.options.maxBlocksPerWorker;
    while (blocks.byEngine.size > limit) this.dropOldest(blocks);
  }

  private dropOldest(blocks: TierBlocks): void {
    const key = blocks.byEngine.shift();
    if (key !== undefined) this.release(blocks, key);
  }

  private dropEngineBlock(blocks: TierBlocks, hashes: HashList, i: number): void {
    const at = hashes.start + i;
    const key = blocks.byEngine.delete(
      hashes.kinds[at]!,
      hashes.his[at]!,
      hashes.los[at]!,
      hashes.texts?.[at],
    );
    if (key !== undefined) this.release(blocks, key);
  }

  /** One engine block mapping to our key is gone. */
  private release(blocks: TierBlocks, key: number): void {
    this.totalBlocks--;
    const khi = Math.floor(key / TWO_32);
    const klo = key >>> 0;
    const refs = (blocks.held.get(HASH_UINT, khi, klo) ?? 1) - 1;
    if (refs <= 0) blocks.held.delete(HASH_UINT, khi, klo);
    else blocks.held.set(HASH_UINT, khi, klo, undefined, refs);
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

  /**
   * Leading blocks of `keys` the worker holds, each at its tier's weight: the GPU run (confirmed,
   * or speculative and not expired), then the run the engine loads from its offload tiers (vLLM
   * looks up the GPU prefix cache first and asks its connector for the blocks after it,
   * vllm/v1/core/sched/scheduler.py `get_num_new_matched_tokens`), each block at its best tier.
   * Without offloaded blocks, the count of the GPU run.
   */
  matchBlocks(workerId: string, keys: readonly number[]): number {
    const w = this.workers.get(workerId);
    if (w === undefined) return 0;
    const now = this.now();
    let n = 0;
    for (; n < keys.length; n++) {
      const key = keys[n]!;
      if (holdsKey(w, key)) continue;
      const expiry = w.speculative.get(key);
      if (expiry === undefined || expiry <= now) break;
    }
    let credit = n * this.weights[GPU_TIER]!;
    if (w.lower.length === 0) return credit;
    for (; n < keys.length; n++) {
      let best = 0;
      for (let tier = 1; tier < TIER_COUNT; tier++) {
        const lower = w.lower[tier];
        if (lower !== undefined && holdsKey(lower, keys[n]!))
          best = Math.max(best, this.weights[tier]!);
      }
      if (best === 0) break;
      credit += best;
    }
    return credit;
  }

  /** The worker is about to cache these blocks: hold them speculatively for the TTL. */
  speculate(workerId: string, keys: readonly number[]): void {
    const w = this.workers.get(workerId);
    if (w === undefined) return;
    const now = this.now();
    const ttl = this.options.speculativeTtlMs;
    const expiry = now + ttl;
    for (const key of keys) {
      if (holdsKey(w, key)) continue;
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

  /** Engine blocks held on the worker's GPU (speculative ones not counted). */
  blockCount(workerId: string): number {
    return this.workers.get(workerId)?.byEngine.size ?? 0;
  }

  /** Engine blocks held on one tier of the worker's engine. */
  tierBlockCount(workerId: string, tier: KvTier): number {
    const w = this.workers.get(workerId);
    return w === undefined ? 0 : (this.tier(w, tier, false)?.byEngine.size ?? 0);
  }

  speculativeCount(workerId: string): number {
    return this.workers.get(workerId)?.speculative.size ?? 0;
  }

  /** Engine blocks held for all workers, every tier (the size metric). */
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
