import { checkPositiveInteger } from "../tree/char-budget.js";
import { BlockChain } from "./block-chain.js";
import { BlockLru } from "./block-lru.js";
import type { EvictionUnit, PrefixIndex } from "./prefix-index.js";

/** GIE/llm-d: 16 tokens a block at the 4 characters a token it assumes (approximateprefix). */
export const GIE_BLOCK_TOKENS = 16;
export const GIE_CHARS_PER_TOKEN = 4;
export const DEFAULT_BLOCK_CHARS = GIE_BLOCK_TOKENS * GIE_CHARS_PER_TOKEN;
/**
 * GIE's lruCapacityPerServer: 31,250 blocks of 16 tokens, about the 500k tokens of KV a Llama-3-8B
 * has on an H100 (the comment beside the default in GIE's approximateprefix types).
 */
export const DEFAULT_CAPACITY_BLOCKS = 31_250;
/** GIE's maxPrefixBlocksToMatch: blocks past it are neither hashed nor matched. */
export const DEFAULT_MAX_BLOCKS = 256;
/** AIBrix's character tokenizer: 128 characters a block (seed 000, AIBRIX_PREFIX_CACHE_BLOCK_SIZE). */
export const AIBRIX_BLOCK_CHARS = 128;

export interface BlockHashIndexOptions {
  /** Characters a block (GIE: blockSizeTokens × 4 = 64; AIBrix: 128). */
  blockChars?: number;
  /** Blocks each worker holds until its engine's capacity is learned (setBudget). */
  capacityBlocks?: number;
  /** Blocks hashed from the start of a text at most. */
  maxBlocks?: number;
  /** Seed of every chain (a fixed default: replicas and tests see the same keys). */
  seed?: number;
  /** Called with the characters evicted by any eviction (metrics). */
  onEvict?: (evictedChars: number) => void;
}

const BLOCK_HASH_INDEX = "block_hash";

/**
 * The approximate block-hash prefix index of GIE / llm-d (the approximate prefix producer and
 * scorer) and AIBrix (the prefix-cache router), behind the same seam as the character trees.
 *
 * A text is cut into fixed blocks of characters named by chained hashes (block-chain.ts); each
 * worker keeps an LRU of the blocks routed to it (block-lru.ts). A worker's match is the leading
 * blocks it holds × their characters, so `match` reports characters like the trees, but always a
 * whole number of blocks (a multiple of blockChars, but for a block lengthened by one to keep a
 * surrogate pair whole): the score GIE and AIBrix use is that over the text's length.
 *
 * It learns from routing as the trees do: `insert` on a decision, `truncate` when a worker did not
 * accept a request or reported fewer cached tokens. Budgets are in characters through the
 * interface (setBudget, learned from the engine's KV capacity with --max-tree-size auto); a worker
 * holds at most budget / blockChars blocks. Memory: about 50 bytes per block held (block-lru.ts).
 *
 * Cheaper than the trees per character held, and the per-decision cost does not grow with the
 * text beyond its hashing (once per decision); coarser: a prefix shorter than a block, or the
 * tail of a text, never matches.
 */
export class BlockHashIndex implements PrefixIndex {
  readonly name = BLOCK_HASH_INDEX;
  private readonly initialBudget: number;
  private readonly lrus = new Map<string, BlockLru>();
  private chain: BlockChain;
  private readonly maxBlocks: number;
  private readonly seed: number;
  private readonly onEvict: ((chars: number) => void) | undefined;
  /** A block size was learned from an engine (learnBlockTokens); later reports are ignored. */
  private learned = false;
  /**
   * Low 32 bits of a first block's key → the LRUs holding such a first block (once per block), so
   * that a match probes only the workers that hold the text's first block instead of every
   * candidate's table (GIE keeps such a reverse map for every block: indexer.go `hashToPods`).
   */
  private readonly rootHolders = new Map<number, BlockLru[]>();
  private stamp = 0;
  private readonly onRoot = (lru: BlockLru, lo: number, added: boolean): void => {
    const holders = this.rootHolders.get(lo);
    if (added) {
      if (holders === undefined) this.rootHolders.set(lo, [lru]);
      else holders.push(lru);
      return;
    }
    if (holders === undefined) return;
    const at = holders.indexOf(lru);
    if (at >= 0) {
      holders[at] = holders[holders.length - 1]!;
      holders.pop();
    }
    if (holders.length === 0) this.rootHolders.delete(lo);
  };

  constructor(options: BlockHashIndexOptions = {}) {
    const blockChars = checkPositiveInteger(
      "BlockHashIndex",
      "blockChars",
      options.blockChars ?? DEFAULT_BLOCK_CHARS,
    );
    const capacity = checkPositiveInteger(
      "BlockHashIndex",
      "capacityBlocks",
      options.capacityBlocks ?? DEFAULT_CAPACITY_BLOCKS,
    );
    this.maxBlocks = checkPositiveInteger(
      "BlockHashIndex",
      "maxBlocks",
      options.maxBlocks ?? DEFAULT_MAX_BLOCKS,
    );
    this.initialBudget = checkPositiveInteger(
      "BlockHashIndex",
      "capacityBlocks × blockChars",
      capacity * blockChars,
    );
    this.seed = (options.seed ?? 0x9e3779b9) | 0;
    this.chain = new BlockChain(blockChars, this.maxBlocks, this.seed);
    this.onEvict = options.onEvict;
  }

  /** Characters a block. */
  get blockChars(): number {
    return this.chain.blockChars;
  }

  /**
   * An engine reported its KV block size in tokens (vLLM's cache_config_info block_size): blocks
   * become that many tokens × 4 characters, as GIE's autoTune sizes them (approximateprefix/
   * plugin.go `GetBlockSize`: the first endpoint's CacheBlockSize). The first report counts;
   * a fleet mixing block sizes keeps the first (one chain per index). Changing the size forgets
   * every worker's blocks (their keys were cut at the old size); budgets stay. Returns true when
   * the block size changed.
   */
  learnBlockTokens(tokens: number | undefined): boolean {
    if (this.learned || tokens === undefined || !Number.isSafeInteger(tokens) || tokens <= 0) {
      return false;
    }
    this.learned = true;
    const blockChars = tokens * GIE_CHARS_PER_TOKEN;
    if (blockChars === this.chain.blockChars) return false;
    this.chain = new BlockChain(blockChars, this.maxBlocks, this.seed);
    for (const lru of this.lrus.values()) lru.clear();
    this.rootHolders.clear();
    return true;
  }

  addWorker(workerId: string): void {
    if (!this.lrus.has(workerId)) {
      this.lrus.set(workerId, new BlockLru(this.initialBudget, this.onEvict, this.onRoot));
    }
  }

  removeWorker(workerId: string): void {
    const lru = this.lrus.get(workerId);
    if (lru === undefined) return;
    lru.forEachRoot((lo) => this.onRoot(lru, lo, false));
    lru.clear();
    this.lrus.delete(workerId);
  }

  match(
    text: string,
    model: string | undefined,
    workers: readonly { readonly id: string }[],
    out: number[],
  ): void {
    const chain = this.chain;
    const blocks = chain.cut(text, model);
    const holders = blocks === 0 ? undefined : this.rootHolders.get(chain.los[0]!);
    if (holders === undefined) {
      // Nobody holds the first block: nothing to look up per worker.
      for (let i = 0; i < workers.length; i++) out[i] = 0;
      return;
    }
    const stamp = ++this.stamp;
    for (const lru of holders) lru.stamp = stamp;
    let guess = 0;
    for (let i = 0; i < workers.length; i++) {
      const lru = this.lrus.get(workers[i]!.id);
      if (lru === undefined || lru.stamp !== stamp) {
        out[i] = 0;
        continue;
      }
      const held = lru.matchBlocks(chain, guess);
      if (held > 0) guess = held;
      out[i] = chain.charsOf(held);
    }
  }

  insert(workerId: string, model: string | undefined, text: string): void {
    const lru = this.lrus.get(workerId);
    if (lru === undefined) return;
    this.chain.cut(text, model);
    lru.insert(this.chain);
  }

  truncate(workerId: string, model: string | undefined, text: string, keep: number): number {
    if (!(keep >= 0)) {
      throw new RangeError(`truncate keep must be a number >= 0, got ${String(keep)}`);
    }
    const lru = this.lrus.get(workerId);
    if (lru === undefined) return 0;
    this.chain.cut(text, model);
    return lru.truncate(this.chain, this.chain.blockAfter(keep));
  }

  setBudget(workerId: string, chars: number): number {
    checkPositiveInteger("BlockHashIndex", "budget", chars);
    return this.lrus.get(workerId)?.setBudget(chars) ?? 0;
  }

  size(workerId: string): number {
    return this.lrus.get(workerId)?.chars ?? 0;
  }

  /** Blocks held for the worker (0 for an unknown worker). */
  blocks(workerId: string): number {
    return this.lrus.get(workerId)?.blocks ?? 0;
  }

  evictionUnits(): Iterable<EvictionUnit> {
    return this.lrus.values();
  }

  /** The worker's LRU (tests and benchmarks). */
  lruOf(workerId: string): BlockLru | undefined {
    return this.lrus.get(workerId);
  }

  /** Throws when an invariant of any worker's LRU does not hold (tests). */
  check(): void {
    const expected = new Map<number, number>();
    for (const lru of this.lrus.values()) {
      lru.check();
      lru.forEachRoot((lo) => expected.set(lo, (expected.get(lo) ?? 0) + 1));
    }
    let total = 0;
    for (const [lo, holders] of this.rootHolders) {
      if (holders.length !== expected.get(lo))
        throw new Error(`first-block holders of ${lo} wrong`);
      total += holders.length;
    }
    let want = 0;
    for (const n of expected.values()) want += n;
    if (total !== want) throw new Error(`first-block holders ${total}, blocks ${want}`);
  }
}
