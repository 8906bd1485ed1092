/**
 * The simulated engine's own prefix KV cache, modelled on vLLM's automatic prefix caching and
 * independent of anything the router guesses:
 *
 * - KV memory is a pool of fixed-size blocks (16 tokens by default, vLLM's default).
 * - A full block is identified by a chained hash: hash(parent block's hash, the block's token ids).
 *   Only full blocks are cached; a partial tail block is private to its request.
 * - A request's cached tokens are the tokens of the longest run of leading blocks already present,
 *   capped so that at least one prompt token is computed (the engine needs its logits).
 * - A running request pins its blocks (reference counts) and reserves the blocks it will fill
 *   (rest of the prompt plus max output). Blocks nobody references stay cached until memory is
 *   needed, then the least recently used go first; among blocks freed together the tail goes
 *   before its parents (they are queued in reverse, as vLLM does), so prefixes outlive suffixes.
 *
 * Checked against the engines' source: vLLM v1 keeps unreferenced cached blocks in a free queue
 * (vllm/v1/core/kv_cache_utils.py FreeKVCacheBlockQueue), takes new blocks from its head and drops
 * a taken block's hash then (vllm/v1/core/block_pool.py get_new_blocks / _maybe_evict_cached_block),
 * and appends a finished request's blocks in reverse (single_type_kv_cache_manager.py free) - what
 * `free` and `evictUntil` do here. SGLang's RadixCache (python/sglang/srt/mem_cache/radix_cache.py
 * evict) evicts unlocked leaves by last access time, in tokens rather than blocks (page size 1 by
 * default): the same LRU of unpinned suffixes at a finer grain.
 *
 * An optional CPU tier (cpuTierBlocks) behind the GPU pool, as vLLM's offloading connector keeps
 * one (vllm/distributed/kv_transfer/kv_connector/v1/offloading/): every newly computed block is
 * written through to it (BlockStored, medium "CPU", the block named by its hash alone), it keeps
 * its own LRU (BlockRemoved "CPU" when it drops one; each admission touches the prompt's blocks,
 * last first), and a GPU eviction leaves the CPU copy (BlockRemoved "GPU" only). At admission the
 * blocks after the GPU hit that the CPU tier holds are loaded back into new GPU blocks instead of
 * computed: they count as cached, and the engine schedules their transfer (engine.ts loadRule).
 */
import { fmix32 } from "../src/hash/fmix32.js";

/** A cached block: its identity and how many running requests hold it. */
interface Block {
  readonly hash: number;
  refs: number;
}

/** One request's hold on the pool, from admission until release. */
export interface KvAllocation {
  /** Prompt tokens found in the cache at admission (loaded from the CPU tier included). */
  readonly cachedTokens: number;
  /** Of those, tokens loaded from the CPU tier (their transfer is charged). */
  readonly loadedTokens: number;
  /** Hashed blocks this request holds, in sequence order. */
  readonly blocks: Block[];
  /** Reserved, not yet hashed blocks (to be filled by prefill and decode). */
  reserved: number;
  released: boolean;
}

export interface KvCacheOptions {
  /** Capacity of the pool in tokens; rounded down to whole blocks. */
  capacityTokens: number;
  /** Tokens per block. */
  blockSize: number;
  /** Blocks of the CPU tier behind the pool (0 or absent: none). */
  cpuTierTokens?: number;
  /** Told of every block stored and removed, as an engine publishes KV events (sim/kv-publisher.ts). */
  listener?: KvCacheListener;
}

/** Where a block is, as vLLM's events name it (vllm/distributed/kv_events.py MEDIUM_*). */
export type SimMedium = "GPU" | "CPU";

/** What the cache tells a KV-event publisher (vLLM's BlockStored / BlockRemoved / AllBlocksCleared). */
export interface KvCacheListener {
  /** New blocks, in order; `parent` is the hash before the first, null at the start of a sequence. */
  stored(hashes: number[], parent: number | null, tokens: number[], medium?: SimMedium): void;
  removed(hashes: number[], medium?: SimMedium): void;
  cleared(): void;
}

const TWO_32 = 2 ** 32;
const ROOT_HASH = 0x5eed;

/**
 * The hash of a block given its parent's hash and its tokens: 53 bits (two mixed 32-bit lanes),
 * so that collisions are negligible for any pool that fits in memory.
 */
export function chainHash(
  parent: number,
  tokens: readonly number[],
  start: number,
  end: number,
): number {
  let h1 = Math.floor(parent / TWO_32) ^ 0x9e3779b9;
  let h2 = (parent >>> 0) ^ 0x85ebca6b;
  for (let i = start; i < end; i++) {
    const t = tokens[i] as number;
    h1 = Math.imul(h1 ^ t, 0x01000193);
    h2 = Math.imul(h2 ^ t, 0x5bd1e995);
    h2 ^= h2 >>> 13;
  }
  h1 = fmix32(h1 ^ (end - start));
  h2 = fmix32(h2 ^ h1);
  return (h1 >>> 11) * TWO_32 + (h2 >>> 0);
}

export class PrefixKvCache {
  readonly blockSize: number;
  readonly totalBlocks: number;
  /** Every hashed block in the pool, pinned or not. */
  private readonly byHash = new Map<number, Block>();
  /** Hashed blocks with no references, least recently used first (Map keeps insertion order). */
  private readonly free = new Map<number, Block>();
  private pinned = 0;
  private reservedTotal = 0;
  private evictedTotal = 0;
  private readonly listener: KvCacheListener | undefined;
  /** Blocks the CPU tier holds at most (0: no tier). */
  readonly cpuTierBlocks: number;
  /** The CPU tier's blocks, least recently used first. */
  private readonly cpu = new Set<number>();
  private loadedTotal = 0;

  constructor(options: KvCacheOptions) {
    const { capacityTokens, blockSize } = options;
    this.listener = options.listener;
    if (!Number.isInteger(blockSize) || blockSize < 1) {
      throw new RangeError(`blockSize must be a positive integer, got ${blockSize}`);
    }
    if (!Number.isFinite(capacityTokens) || capacityTokens < blockSize) {
      throw new RangeError(
        `capacityTokens must hold at least one block of ${blockSize} tokens, got ${capacityTokens}`,
      );
    }
    this.blockSize = blockSize;
    this.totalBlocks = Math.floor(capacityTokens / blockSize);
    this.cpuTierBlocks = Math.floor((options.cpuTierTokens ?? 0) / blockSize);
  }

  /** Chained hashes of the full blocks of `tokens` (at most `maxBlocks`). */
  blockHashes(tokens: readonly number[], maxBlocks = Number.POSITIVE_INFINITY): number[] {
    const n = Math.min(Math.floor(tokens.length / this.blockSize), maxBlocks);
    const hashes: number[] = [];
    let parent = ROOT_HASH;
    for (let i = 0; i < n; i++) {
      parent = chainHash(parent, tokens, i * this.blockSize, (i + 1) * this.blockSize);
      hashes.push(parent);
    }
    return hashes;
  }

  /** Tokens of `prompt` that admission would find cached now; no side effects. */
  cachedPrefixTokens(prompt: readonly number[]): number {
    // Hashes block by block and stops at the first miss, instead of hashing the whole prompt.
    const n = Math.min(
      Math.floor(prompt.length / this.blockSize),
      this.matchableBlocks(prompt.length),
    );
    let parent = ROOT_HASH;
    let hits = 0;
    let onGpu = true;
    while (hits < n) {
      parent = chainHash(parent, prompt, hits * this.blockSize, (hits + 1) * this.blockSize);
      onGpu &&= this.byHash.has(parent);
      if (!onGpu && !this.cpu.has(parent)) break;
      hits++;
    }
    return hits * this.blockSize;
  }

  /** Blocks a request needs for its whole life (prompt plus every output token). */
  blocksFor(totalTokens: number): number {
    return Math.ceil(totalTokens / this.blockSize);
  }

  /**
   * Admit a request: pin the cached leading blocks of `prompt` and reserve the rest of the
   * `totalTokens` it may occupy, evicting unreferenced blocks if needed. Returns undefined (and
   * changes nothing) when the pool cannot make room now.
   */
  allocate(prompt: readonly number[], totalTokens: number): KvAllocation | undefined {
    const { hits, loaded, needed, shortfall } = this.admission(prompt, totalTokens);
    if (shortfall > 0) return undefined;

    for (const block of hits) this.ref(block);
    this.evictUntil(needed);
    this.reservedTotal += needed;
    const alloc: KvAllocation = {
      cachedTokens: (hits.length + loaded) * this.blockSize,
      loadedTokens: loaded * this.blockSize,
      blocks: hits,
      reserved: needed,
      released: false,
    };
    this.touchCpu(prompt);
    if (loaded > 0) {
      // Loaded from the CPU tier into reserved GPU blocks: stored on the GPU as if computed.
      this.loadedTotal += loaded;
      this.commit(alloc, prompt, alloc.cachedTokens);
    }
    return alloc;
  }

  /** Blocks the pool lacks to admit this request now (0: allocate would succeed); no side effects. */
  shortfallBlocks(prompt: readonly number[], totalTokens: number): number {
    return this.admission(prompt, totalTokens).shortfall;
  }

  /**
   * Blocks that releasing `alloc` would give back to admission: its reservation and the blocks it
   * alone holds (they become evictable). Blocks shared with other requests stay pinned.
   */
  releasableBlocks(alloc: KvAllocation): number {
    if (alloc.released) return 0;
    let alone = 0;
    for (const block of alloc.blocks) if (block.refs === 1) alone++;
    return alloc.reserved + alone;
  }

  /** What admitting `prompt` (occupying up to `totalTokens`) would pin, reserve, and lack. */
  private admission(prompt: readonly number[], totalTokens: number) {
    const hashes = this.blockHashes(prompt, this.matchableBlocks(prompt.length));
    const hits: Block[] = [];
    let hitsNowFree = 0;
    for (const hash of hashes) {
      const block = this.byHash.get(hash);
      if (block === undefined) break;
      hits.push(block);
      if (block.refs === 0) hitsNowFree++;
    }
    // The run after the GPU hit that the CPU tier holds: loaded, not computed.
    let loaded = 0;
    while (hits.length + loaded < hashes.length && this.cpu.has(hashes[hits.length + loaded]!))
      loaded++;
    const needed = Math.max(0, this.blocksFor(Math.max(totalTokens, prompt.length)) - hits.length);
    // Room = everything not pinned or reserved, minus the free blocks this request will pin.
    const room = this.totalBlocks - this.pinned - this.reservedTotal - hitsNowFree;
    return { hits, loaded, needed, shortfall: Math.max(0, needed - room) };
  }

  /**
   * Record that the first `computedTokens` of `tokens` (prompt, then output) now have KV: their
   * full blocks become hashed, findable blocks held by this request.
   */
  commit(alloc: KvAllocation, tokens: readonly number[], computedTokens: number): void {
    if (alloc.released) return;
    const full = Math.floor(Math.min(computedTokens, tokens.length) / this.blockSize);
    let parent = alloc.blocks.length > 0 ? (alloc.blocks.at(-1) as Block).hash : ROOT_HASH;
    // Runs of newly stored blocks, reported as one BlockStored event each.
    let run: { hashes: number[]; parent: number | null; start: number } | undefined;
    const flush = () => {
      if (run === undefined) return;
      const end = run.start + run.hashes.length * this.blockSize;
      if (this.listener !== undefined)
        this.listener.stored(run.hashes, run.parent, tokens.slice(run.start, end));
      this.writeThrough(run.hashes);
      run = undefined;
    };
    for (let i = alloc.blocks.length; i < full && alloc.reserved > 0; i++) {
      const before = parent;
      parent = chainHash(parent, tokens, i * this.blockSize, (i + 1) * this.blockSize);
      let block = this.byHash.get(parent);
      if (block === undefined) {
        block = { hash: parent, refs: 0 };
        this.byHash.set(parent, block);
        run ??= { hashes: [], parent: i === 0 ? null : before, start: i * this.blockSize };
        run.hashes.push(parent);
      } else {
        flush();
      }
      // A block computed twice (two requests raced on the same prefix) is kept once; the
      // duplicate's reservation simply goes back to the pool.
      this.ref(block);
      alloc.blocks.push(block);
      alloc.reserved--;
      this.reservedTotal--;
    }
    flush();
  }

  /** Drop a request's hold: its hashed blocks stay cached (evictable), its reservation is freed. */
  release(alloc: KvAllocation): void {
    if (alloc.released) return;
    alloc.released = true;
    this.reservedTotal -= alloc.reserved;
    alloc.reserved = 0;
    // Tail first, so that it is evicted before the blocks it depends on.
    for (let i = alloc.blocks.length - 1; i >= 0; i--) {
      const block = alloc.blocks[i] as Block;
      block.refs--;
      if (block.refs === 0) {
        this.pinned--;
        this.free.set(block.hash, block);
      }
    }
  }

  has(hash: number): boolean {
    return this.byHash.has(hash);
  }

  /** Whether the CPU tier holds the block. */
  onCpu(hash: number): boolean {
    return this.cpu.has(hash);
  }

  /** Blocks the CPU tier holds. */
  get cpuBlocks(): number {
    return this.cpu.size;
  }

  /** Blocks loaded from the CPU tier so far. */
  get loadedBlocks(): number {
    return this.loadedTotal;
  }

  /**
   * A request's lookup touches the CPU tier's copies of its blocks, last block first, so that a
   * prefix outlives its suffixes there (vLLM's offloading connector touches every block of a
   * request on lookup: offloading/scheduler.py get_num_new_matched_tokens, and its LRU policy
   * moves them to the end in reverse, vllm/v1/kv_offload/cpu/policies/lru.py touch).
   */
  private touchCpu(prompt: readonly number[]): void {
    if (this.cpu.size === 0) return;
    const hashes = this.blockHashes(prompt);
    for (let i = hashes.length - 1; i >= 0; i--) {
      const hash = hashes[i]!;
      if (!this.cpu.delete(hash)) continue;
      this.cpu.add(hash);
    }
  }

  /**
   * New GPU blocks are copied to the CPU tier (vLLM's offloading connector stores each computed
   * block it does not hold yet: lru_manager.py prepare_store); the tier's least recently used go
   * when it is full.
   */
  private writeThrough(hashes: number[]): void {
    if (this.cpuTierBlocks === 0) return;
    const added = hashes.filter((hash) => !this.cpu.has(hash));
    if (added.length === 0) return;
    for (const hash of added) this.cpu.add(hash);
    // Named by hash alone, as vLLM's connector does unless its events are self-describing
    // (offloading/events.py `_placeholder_stored`): the GPU store just before gave the tokens.
    this.listener?.stored(added, null, [], "CPU");
    if (this.cpu.size <= this.cpuTierBlocks) return;
    const removed: number[] = [];
    for (const hash of this.cpu) {
      if (this.cpu.size <= this.cpuTierBlocks) break;
      this.cpu.delete(hash);
      removed.push(hash);
    }
    this.listener?.removed(removed, "CPU");
  }

  /** Blocks in use: pinned + reserved + cached but unreferenced. Never above totalBlocks. */
  get usedBlocks(): number {
    return this.pinned + this.reservedTotal + this.free.size;
  }

  get pinnedBlocks(): number {
    return this.pinned;
  }

  get reservedBlocks(): number {
    return this.reservedTotal;
  }

  /** Hashed blocks no running request holds (the evictable cache). */
  get evictableBlocks(): number {
    return this.free.size;
  }

  /** Blocks evicted so far. */
  get evictions(): number {
    return this.evictedTotal;
  }

  /** Fraction of the pool held by running requests (pinned + reserved), as engines report it. */
  get activeUsage(): number {
    return (this.pinned + this.reservedTotal) / this.totalBlocks;
  }

  /** A prompt may reuse at most its first length - 1 tokens: one token must be computed. */
  private matchableBlocks(promptLength: number): number {
    return Math.floor(Math.max(0, promptLength - 1) / this.blockSize);
  }

  private ref(block: Block): void {
    if (block.refs === 0) {
      this.free.delete(block.hash);
      this.pinned++;
    }
    block.refs++;
  }

  /**
   * Drops every block no running request holds (vLLM's reset_prefix_cache); `announce` = false
   * models an engine restart, which publishes nothing (its event sequence starts again instead).
   */
  clearCache(announce = true): void {
    for (const hash of this.free.keys()) this.byHash.delete(hash);
    this.free.clear();
    this.cpu.clear();
    if (announce) this.listener?.cleared();
  }

  /** Evict least recently used unreferenced blocks until `blocks` are unused. */
  private evictUntil(blocks: number): void {
    let unused = this.totalBlocks - this.usedBlocks;
    if (unused >= blocks) return;
    const removed: number[] = [];
    for (const [hash] of this.free) {
      this.free.delete(hash);
      this.byHash.delete(hash);
      this.evictedTotal++;
      removed.push(hash);
      if (++unused >= blocks) break;
    }
    if (removed.length > 0) this.listener?.removed(removed);
  }
}
