import { checkPositiveInteger } from "../tree/char-budget.js";
import type { BlockChain } from "./block-chain.js";
import type { EvictionUnit } from "./prefix-index.js";

/** One block a worker holds: its key, its place in the chain and in the worker's LRU order. */
class BlockEntry {
  firstChild: BlockEntry | null = null;
  nextSibling: BlockEntry | null = null;
  prevSibling: BlockEntry | null = null;
  /** Towards the most recently used end of the LRU list. */
  newer: BlockEntry | null = null;
  /** Towards the least recently used end. */
  older: BlockEntry | null = null;
  /** The next entry in the same map bucket (30 bits of the key), rarely any. */
  sameBucket: BlockEntry | null = null;

  constructor(
    readonly key: number,
    readonly bucket: number,
    readonly parent: BlockEntry | null,
    readonly chars: number,
  ) {}
}

/**
 * The blocks one worker holds, in an LRU of at most `budget` characters (GIE keeps one LRU of
 * block hashes per pod: approximateprefix/indexer.go `podToLRU`).
 *
 * Prefix-closed, as an engine's prefix cache is: every entry's parent block is held too. Inserting
 * a text touches its blocks from the last to the first, so a block is always more recently used
 * than every block after it (vLLM frees a request's blocks in reverse order for the same reason,
 * vllm/v1/core/block_pool.py `free_blocks`); the least recently used entry is then a leaf, and
 * eviction never leaves a block without its parent. Dropping a block (truncate) drops its
 * descendants with it, through the child links. Because of this, whether block i of a
 * text is held is monotone in i, and `match` finds the longest held run by bisection.
 */
export class BlockLru implements EvictionUnit {
  /** Entries by 30 bits of their key; the few that share a bucket are chained (sameBucket). */
  private readonly buckets = new Map<number, BlockEntry>();
  private count = 0;
  /** Most and least recently used. */
  private newest: BlockEntry | null = null;
  private oldest: BlockEntry | null = null;
  private scratch: BlockEntry[] = [];
  /** Characters held (the sum of the entries' block lengths). */
  chars = 0;

  constructor(
    private budget: number,
    private readonly onEvict: ((chars: number) => void) | undefined,
  ) {}

  get blocks(): number {
    return this.count;
  }

  private find(key: number, bucket: number): BlockEntry | undefined {
    let e = this.buckets.get(bucket);
    while (e !== undefined && e.key !== key) e = e.sameBucket ?? undefined;
    return e;
  }

  private add(entry: BlockEntry): void {
    const head = this.buckets.get(entry.bucket);
    if (head !== undefined) entry.sameBucket = head;
    this.buckets.set(entry.bucket, entry);
    this.count++;
  }

  private delete(entry: BlockEntry): void {
    const head = this.buckets.get(entry.bucket);
    if (head === entry) {
      if (entry.sameBucket === null) this.buckets.delete(entry.bucket);
      else this.buckets.set(entry.bucket, entry.sameBucket);
    } else {
      let e = head;
      while (e !== undefined && e.sameBucket !== entry) e = e.sameBucket ?? undefined;
      if (e !== undefined) e.sameBucket = entry.sameBucket;
    }
    entry.sameBucket = null;
    this.count--;
  }

  /** Leading blocks of the chain's text held here. */
  matchBlocks(chain: BlockChain): number {
    const n = chain.count;
    if (n === 0 || this.count === 0) return 0;
    if (!this.holds(chain, 0)) return 0;
    if (this.holds(chain, n - 1)) return n;
    // holds(lo) and not holds(hi): bisect the boundary.
    let lo = 0;
    let hi = n - 1;
    while (hi - lo > 1) {
      const mid = (lo + hi) >>> 1;
      if (this.holds(chain, mid)) lo = mid;
      else hi = mid;
    }
    return lo + 1;
  }

  /** Block i is held and is the child of block i - 1 (a 53-bit key collision fails this check). */
  private holds(chain: BlockChain, i: number): boolean {
    const keys = chain.keys;
    const entry = this.find(keys[i]!, chain.buckets[i]!);
    if (entry === undefined) return false;
    const parent = entry.parent;
    return i === 0 ? parent === null : parent !== null && parent.key === keys[i - 1];
  }

  /** The chain's text was routed here: hold all its blocks, the first most recently used. */
  insert(chain: BlockChain): void {
    const n = chain.count;
    if (n === 0) return;
    const path = this.scratch;
    let parent: BlockEntry | null = null;
    let start = 0;
    let held = 0;
    for (let i = 0; i < n; i++) {
      const key = chain.keys[i]!;
      const end = chain.ends[i]!;
      let entry = this.find(key, chain.buckets[i]!);
      // Another prefix has this key (a 53-bit collision): it keeps it, and this text is held only
      // up to the block before (never a false match, at worst a missed one).
      if (entry !== undefined && entry.parent !== parent) break;
      if (entry === undefined) {
        entry = new BlockEntry(key, chain.buckets[i]!, parent, end - start);
        this.add(entry);
        this.link(entry);
        this.chars += entry.chars;
      }
      path[i] = entry;
      held = i + 1;
      parent = entry;
      start = end;
    }
    for (let i = held - 1; i >= 0; i--) this.touch(path[i]!);
    path.length = 0;
    this.evictToBudget();
  }

  /**
   * Holds no more than the chain's first `keepBlocks` blocks: drops block `keepBlocks` of the text
   * and everything below it. Returns the characters dropped.
   */
  truncate(chain: BlockChain, keepBlocks: number): number {
    if (keepBlocks >= chain.count) return 0;
    for (let i = 0; i <= keepBlocks; i++) if (!this.holds(chain, i)) return 0;
    const entry = this.find(chain.keys[keepBlocks]!, chain.buckets[keepBlocks]!)!;
    return this.removeSubtree(entry);
  }

  /** Sets the budget (characters) and evicts down to it at once. Returns the characters evicted. */
  setBudget(chars: number): number {
    this.budget = checkPositiveInteger("BlockHashIndex", "budget", chars);
    return this.evictToBudget();
  }

  /** Evicts least recently used blocks until the budget holds. Returns the characters evicted. */
  evict(): number {
    return this.evictToBudget();
  }

  clear(): void {
    this.buckets.clear();
    this.count = 0;
    this.newest = null;
    this.oldest = null;
    this.chars = 0;
  }

  private evictToBudget(): number {
    let evicted = 0;
    while (this.chars > this.budget && this.oldest !== null) {
      evicted += this.removeSubtree(this.oldest);
    }
    if (evicted > 0) this.onEvict?.(evicted);
    return evicted;
  }

  /** Drops an entry and its descendants. Returns their characters. */
  private removeSubtree(entry: BlockEntry): number {
    let removed = 0;
    // Depth-first without recursion: a chain can be maxBlocks deep.
    const stack = [entry];
    this.unlinkChild(entry);
    while (stack.length > 0) {
      const e = stack.pop()!;
      for (let c = e.firstChild; c !== null; c = c.nextSibling) stack.push(c);
      this.delete(e);
      this.unlinkLru(e);
      removed += e.chars;
    }
    this.chars -= removed;
    return removed;
  }

  /** Adds a new entry under its parent and at the newest end of the LRU list. */
  private link(entry: BlockEntry): void {
    const parent = entry.parent;
    if (parent !== null) {
      entry.nextSibling = parent.firstChild;
      if (parent.firstChild !== null) parent.firstChild.prevSibling = entry;
      parent.firstChild = entry;
    }
    this.pushNewest(entry);
  }

  private unlinkChild(entry: BlockEntry): void {
    const parent = entry.parent;
    if (entry.prevSibling !== null) entry.prevSibling.nextSibling = entry.nextSibling;
    else if (parent !== null) parent.firstChild = entry.nextSibling;
    if (entry.nextSibling !== null) entry.nextSibling.prevSibling = entry.prevSibling;
    entry.prevSibling = null;
    entry.nextSibling = null;
  }

  private touch(entry: BlockEntry): void {
    if (this.newest === entry) return;
    this.unlinkLru(entry);
    this.pushNewest(entry);
  }

  private pushNewest(entry: BlockEntry): void {
    entry.older = this.newest;
    entry.newer = null;
    if (this.newest !== null) this.newest.newer = entry;
    this.newest = entry;
    if (this.oldest === null) this.oldest = entry;
  }

  private unlinkLru(entry: BlockEntry): void {
    if (entry.newer !== null) entry.newer.older = entry.older;
    else if (this.newest === entry) this.newest = entry.older;
    if (entry.older !== null) entry.older.newer = entry.newer;
    else if (this.oldest === entry) this.oldest = entry.newer;
    entry.newer = null;
    entry.older = null;
  }

  /** Throws when an invariant does not hold (tests). */
  check(): void {
    let chars = 0;
    let count = 0;
    let prev: BlockEntry | null = null;
    const seen = new Set<BlockEntry>();
    for (let e = this.newest; e !== null; e = e.older) {
      if (e.newer !== prev) throw new Error("LRU links broken");
      if (this.find(e.key, e.bucket) !== e) throw new Error("LRU entry not in the map");
      if (e.parent !== null && !seen.has(e.parent)) {
        throw new Error("a block is more recently used than its parent, or its parent is gone");
      }
      seen.add(e);
      chars += e.chars;
      count++;
      prev = e;
    }
    if (prev !== this.oldest) throw new Error("oldest is not the end of the LRU list");
    if (count !== this.count) throw new Error("LRU list and map differ in size");
    if (chars !== this.chars) throw new Error(`chars ${this.chars} != counted ${chars}`);
    if (this.chars > this.budget) throw new Error(`chars ${this.chars} over budget ${this.budget}`);
  }
}
