import { checkPositiveInteger } from "../tree/char-budget.js";
import type { BlockChain } from "./block-chain.js";
import type { EvictionUnit } from "./prefix-index.js";

/** The first size of a worker's arrays (slots), doubled as it fills. */
const INITIAL_SLOTS = 64;
/** Slot 0 is "none". */
const NONE = 0;

/**
 * The blocks one worker holds, in an LRU of at most `budget` characters (GIE keeps one LRU of
 * block hashes per pod: approximateprefix/indexer.go `podToLRU`).
 *
 * Prefix-closed, as an engine's prefix cache is: every block's parent block is held too. Inserting
 * a text touches its blocks from the last to the first, so a block is always more recently used
 * than every block after it (vLLM frees a request's blocks in reverse order "so that the tail
 * blocks are evicted first", vllm/v1/core/single_type_kv_cache_manager.py `free`, before
 * block_pool.py `free_blocks` queues them); the least recently used block is then a leaf, and
 * eviction never leaves a block without its parent. Dropping a block (truncate) drops its
 * descendants with it, through the child links. Because of this, whether block i of a text is held
 * is monotone in i, and `match` finds the longest held run by bisection.
 *
 * Layout: one slot per block in typed arrays (key, parent, child and sibling links, LRU links,
 * length: 40 bytes a block) and an open-addressing table from key to slot (linear probing, at most
 * half full, backward-shift deletion). An object and a Map entry per block cost ~170 bytes, GC
 * pauses of milliseconds over millions of blocks, and a Map keyed by 53-bit numbers several times
 * the lookup time; typed arrays are neither scanned by the GC nor boxed. The arrays grow by
 * doubling with the blocks held (never beyond what the budget admits) and never shrink.
 */
export class BlockLru implements EvictionUnit {
  private keyHi = new Int32Array(INITIAL_SLOTS);
  private keyLo = new Int32Array(INITIAL_SLOTS);
  private parent = new Int32Array(INITIAL_SLOTS);
  private firstChild = new Int32Array(INITIAL_SLOTS);
  /** Next sibling; for a free slot, the next free slot. */
  private nextSibling = new Int32Array(INITIAL_SLOTS);
  private prevSibling = new Int32Array(INITIAL_SLOTS);
  /** Towards the most recently used end of the LRU list. */
  private newer = new Int32Array(INITIAL_SLOTS);
  /** Towards the least recently used end. */
  private older = new Int32Array(INITIAL_SLOTS);
  private length = new Int32Array(INITIAL_SLOTS);
  /** Slots used so far (slot 0 is never used); slots below it that were freed are in freeHead. */
  private used = 1;
  private freeHead = NONE;
  /** key → slot, open addressing; size a power of two, at least twice the blocks held. */
  private table = new Int32Array(INITIAL_SLOTS * 2);
  private mask = INITIAL_SLOTS * 2 - 1;
  private newest = NONE;
  private oldest = NONE;
  private path = new Int32Array(0);
  private readonly stack: number[] = [];
  /** Blocks held. */
  blocks = 0;
  /** Scratch for BlockHashIndex.match: equal to the match's stamp when this LRU holds a first block. */
  stamp = 0;
  /** Characters held (the sum of the blocks' lengths). */
  chars = 0;

  /**
   * @param onRoot told when a first block (no parent) comes or goes, with the low 32 bits of its
   *   key: the index keeps, per first block, the workers holding it (BlockHashIndex.match).
   */
  constructor(
    private budget: number,
    private readonly onEvict: ((chars: number) => void) | undefined,
    private readonly onRoot?: (lru: BlockLru, lo: number, added: boolean) => void,
  ) {}

  /** Calls `fn` with the low 32 bits of every first block's key. */
  forEachRoot(fn: (lo: number) => void): void {
    for (let s = this.newest; s !== NONE; s = this.older[s]!) {
      if (this.parent[s] === NONE) fn(this.keyLo[s]!);
    }
  }

  /**
   * Leading blocks of the chain's text held here. `guess` (another worker's answer, often the same:
   * a system prompt every worker holds) is tried first: two probes when right.
   */
  matchBlocks(chain: BlockChain, guess = 0): number {
    const n = chain.count;
    if (n === 0 || this.blocks === 0) return 0;
    let lo = 0;
    let hi = n - 1;
    if (guess > 0 && guess < n) {
      if (this.holds(chain, guess - 1)) {
        if (!this.holds(chain, guess)) return guess;
        lo = guess;
      } else {
        hi = guess - 1;
      }
    }
    if (lo === 0 && !this.holds(chain, 0)) return 0;
    if (hi === n - 1 && this.holds(chain, n - 1)) return n;
    // holds(lo) and not holds(hi): bisect the boundary.
    while (hi - lo > 1) {
      const mid = (lo + hi) >>> 1;
      if (this.holds(chain, mid)) lo = mid;
      else hi = mid;
    }
    return lo + 1;
  }

  /** Block i is held and is the child of block i - 1 (a 53-bit key collision fails this check). */
  private holds(chain: BlockChain, i: number): boolean {
    const slot = this.find(chain.his[i]!, chain.los[i]!);
    if (slot === NONE) return false;
    const parent = this.parent[slot]!;
    if (i === 0) return parent === NONE;
    return (
      parent !== NONE &&
      this.keyLo[parent] === chain.los[i - 1] &&
      this.keyHi[parent] === chain.his[i - 1]
    );
  }

  /** The chain's text was routed here: hold all its blocks, the first most recently used. */
  insert(chain: BlockChain): void {
    const n = chain.count;
    if (n === 0) return;
    if (this.path.length < n) this.path = new Int32Array(chain.maxBlocks);
    const path = this.path;
    let parent = NONE;
    let start = 0;
    let held = 0;
    for (let i = 0; i < n; i++) {
      const hi = chain.his[i]!;
      const lo = chain.los[i]!;
      const end = chain.ends[i]!;
      let slot = this.find(hi, lo);
      // Another prefix has this key (a 53-bit collision): it keeps it, and this text is held only
      // up to the block before (never a false match, at worst a missed one).
      if (slot !== NONE && this.parent[slot] !== parent) break;
      if (slot === NONE) slot = this.add(hi, lo, parent, end - start);
      path[i] = slot;
      held = i + 1;
      parent = slot;
      start = end;
    }
    for (let i = held - 1; i >= 0; i--) this.touch(path[i]!);
    this.evictToBudget();
  }

  /**
   * Holds no more than the chain's first `keepBlocks` blocks: drops block `keepBlocks` of the text
   * and everything below it. Returns the characters dropped.
   */
  truncate(chain: BlockChain, keepBlocks: number): number {
    if (keepBlocks >= chain.count) return 0;
    for (let i = 0; i <= keepBlocks; i++) if (!this.holds(chain, i)) return 0;
    return this.removeSubtree(this.find(chain.his[keepBlocks]!, chain.los[keepBlocks]!));
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

  /** Forgets every block and gives the arrays back. */
  clear(): void {
    this.resize(0);
    this.resize(INITIAL_SLOTS);
    this.table = new Int32Array(INITIAL_SLOTS * 2);
    this.mask = INITIAL_SLOTS * 2 - 1;
    this.used = 1;
    this.freeHead = NONE;
    this.newest = NONE;
    this.oldest = NONE;
    this.blocks = 0;
    this.chars = 0;
  }

  private evictToBudget(): number {
    let evicted = 0;
    while (this.chars > this.budget && this.oldest !== NONE) {
      evicted += this.removeSubtree(this.oldest);
    }
    if (evicted > 0) this.onEvict?.(evicted);
    return evicted;
  }

  private find(hi: number, lo: number): number {
    const table = this.table;
    const mask = this.mask;
    for (let i = lo & mask; ; i = (i + 1) & mask) {
      const slot = table[i]!;
      if (slot === NONE) return NONE;
      if (this.keyLo[slot] === lo && this.keyHi[slot] === hi) return slot;
    }
  }

  /** A new block under `parent`, at the newest end of the LRU list. */
  private add(hi: number, lo: number, parent: number, length: number): number {
    if ((this.blocks + 1) * 2 > this.table.length) this.rehash(this.table.length * 2);
    let slot = this.freeHead;
    if (slot !== NONE) {
      this.freeHead = this.nextSibling[slot]!;
    } else {
      if (this.used === this.keyHi.length) this.resize(this.keyHi.length * 2);
      slot = this.used++;
    }
    this.keyHi[slot] = hi;
    this.keyLo[slot] = lo;
    this.parent[slot] = parent;
    this.firstChild[slot] = NONE;
    this.prevSibling[slot] = NONE;
    this.length[slot] = length;
    if (parent !== NONE) {
      const first = this.firstChild[parent]!;
      this.nextSibling[slot] = first;
      if (first !== NONE) this.prevSibling[first] = slot;
      this.firstChild[parent] = slot;
    } else {
      this.nextSibling[slot] = NONE;
      this.onRoot?.(this, lo, true);
    }
    this.pushNewest(slot);
    this.place(slot);
    this.blocks++;
    this.chars += length;
    return slot;
  }

  /** Drops a block and its descendants. Returns their characters. */
  private removeSubtree(root: number): number {
    let removed = 0;
    this.unlinkChild(root);
    // Depth-first without recursion: a chain can be maxBlocks deep.
    const stack = this.stack;
    stack.push(root);
    while (stack.length > 0) {
      const slot = stack.pop()!;
      for (let c = this.firstChild[slot]!; c !== NONE; c = this.nextSibling[c]!) stack.push(c);
      this.unplace(slot);
      this.unlinkLru(slot);
      if (this.parent[slot] === NONE) this.onRoot?.(this, this.keyLo[slot]!, false);
      removed += this.length[slot]!;
      this.parent[slot] = NONE;
      this.firstChild[slot] = NONE;
      this.nextSibling[slot] = this.freeHead;
      this.freeHead = slot;
      this.blocks--;
    }
    this.chars -= removed;
    return removed;
  }

  private unlinkChild(slot: number): void {
    const prev = this.prevSibling[slot]!;
    const next = this.nextSibling[slot]!;
    if (prev !== NONE) this.nextSibling[prev] = next;
    else if (this.parent[slot] !== NONE) this.firstChild[this.parent[slot]!] = next;
    if (next !== NONE) this.prevSibling[next] = prev;
    this.prevSibling[slot] = NONE;
    this.nextSibling[slot] = NONE;
  }

  private touch(slot: number): void {
    if (this.newest === slot) return;
    this.unlinkLru(slot);
    this.pushNewest(slot);
  }

  private pushNewest(slot: number): void {
    this.older[slot] = this.newest;
    this.newer[slot] = NONE;
    if (this.newest !== NONE) this.newer[this.newest] = slot;
    this.newest = slot;
    if (this.oldest === NONE) this.oldest = slot;
  }

  private unlinkLru(slot: number): void {
    const newer = this.newer[slot]!;
    const older = this.older[slot]!;
    if (newer !== NONE) this.older[newer] = older;
    else if (this.newest === slot) this.newest = older;
    if (older !== NONE) this.newer[older] = newer;
    else if (this.oldest === slot) this.oldest = newer;
    this.newer[slot] = NONE;
    this.older[slot] = NONE;
  }

  /** Puts a slot in the table at the first free place from its home. */
  private place(slot: number): void {
    const mask = this.mask;
    let i = this.keyLo[slot]! & mask;
    while (this.table[i] !== NONE) i = (i + 1) & mask;
    this.table[i] = slot;
  }

  /** Takes a slot out of the table, shifting back the entries that probed past it. */
  private unplace(slot: number): void {
    const table = this.table;
    const mask = this.mask;
    let i = this.keyLo[slot]! & mask;
    while (table[i] !== slot) i = (i + 1) & mask;
    table[i] = NONE;
    let j = i;
    for (;;) {
      j = (j + 1) & mask;
      const moved = table[j]!;
      if (moved === NONE) return;
      const home = this.keyLo[moved]! & mask;
      // The entry at j may move to the hole at i unless its home lies cyclically in (i, j].
      const stays = i <= j ? home > i && home <= j : home > i || home <= j;
      if (!stays) {
        table[i] = moved;
        table[j] = NONE;
        i = j;
      }
    }
  }

  private rehash(size: number): void {
    this.table = new Int32Array(size);
    this.mask = size - 1;
    for (let slot = this.newest; slot !== NONE; slot = this.older[slot]!) this.place(slot);
  }

  private resize(slots: number): void {
    const grow = (a: Int32Array): Int32Array<ArrayBuffer> => {
      const b = new Int32Array(slots);
      b.set(a.subarray(0, Math.min(a.length, slots)));
      return b;
    };
    this.keyHi = grow(this.keyHi);
    this.keyLo = grow(this.keyLo);
    this.parent = grow(this.parent);
    this.firstChild = grow(this.firstChild);
    this.nextSibling = grow(this.nextSibling);
    this.prevSibling = grow(this.prevSibling);
    this.newer = grow(this.newer);
    this.older = grow(this.older);
    this.length = grow(this.length);
  }

  /** Slots the arrays have room for, and places in the table (tests: memory stays bounded). */
  get allocated(): { slots: number; table: number } {
    return { slots: this.keyHi.length, table: this.table.length };
  }

  /** Throws when an invariant does not hold (tests). */
  check(): void {
    let chars = 0;
    let count = 0;
    let prev = NONE;
    const seen = new Set<number>();
    for (let s = this.newest; s !== NONE; s = this.older[s]!) {
      if (this.newer[s] !== prev) throw new Error("LRU links broken");
      if (this.find(this.keyHi[s]!, this.keyLo[s]!) !== s)
        throw new Error("block not in the table");
      const parent = this.parent[s]!;
      if (parent !== NONE && !seen.has(parent)) {
        throw new Error("a block is more recently used than its parent, or its parent is gone");
      }
      seen.add(s);
      chars += this.length[s]!;
      count++;
      prev = s;
    }
    if (prev !== this.oldest) throw new Error("oldest is not the end of the LRU list");
    if (count !== this.blocks) throw new Error(`LRU list holds ${count}, counted ${this.blocks}`);
    let inTable = 0;
    for (const slot of this.table) if (slot !== NONE) inTable++;
    if (inTable !== count) throw new Error(`table holds ${inTable} of ${count} blocks`);
    if (chars !== this.chars) throw new Error(`chars ${this.chars} != counted ${chars}`);
    if (this.chars > this.budget) throw new Error(`chars ${this.chars} over budget ${this.budget}`);
  }
}
