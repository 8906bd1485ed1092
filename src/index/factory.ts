import { ApproximateIndex } from "./approximate-index.js";
import {
  BlockHashIndex,
  DEFAULT_BLOCK_CHARS,
  DEFAULT_CAPACITY_BLOCKS,
} from "./block-hash-index.js";
import type { PrefixIndex } from "./prefix-index.js";
import { SharedIndex } from "./shared-index.js";

/** The base prefix indexes (--prefix-index); others (hybrid, publishing) wrap the one built here. */
export const PREFIX_INDEX_NAMES = ["approx", "shared", "block_hash"] as const;
export type PrefixIndexName = (typeof PREFIX_INDEX_NAMES)[number];

/** The character trees: the same answers, so the route header does not name which one answered. */
export const TREE_INDEX_NAMES: readonly string[] = ["approx", "shared"];

export interface BaseIndexOptions {
  /** Budget of each worker, in characters (a fixed --max-tree-size; undefined = learned). */
  maxTreeSize?: number;
  /** block_hash: characters a block. */
  blockChars?: number;
  /** block_hash: blocks each worker holds until a budget is set (without a fixed maxTreeSize). */
  capacityBlocks?: number;
  /** Called with the characters evicted by any eviction (metrics). */
  onEvict?: (evictedChars: number) => void;
}

/**
 * approx: one radix tree per worker (a decision walks every candidate's tree);
 * shared: one tree per model whose nodes record which workers hold them (one walk per decision);
 * block_hash: GIE/llm-d's and AIBrix's chained block hashes, an LRU of blocks per worker.
 * All answer the same questions (test/index/prefix-index.conformance.ts); the trees to the
 * character, the block index in whole blocks.
 */
export function createBaseIndex(name: PrefixIndexName, options: BaseIndexOptions): PrefixIndex {
  switch (name) {
    case "approx":
      return new ApproximateIndex(options);
    case "shared":
      return new SharedIndex(options);
    case "block_hash": {
      const blockChars = options.blockChars ?? DEFAULT_BLOCK_CHARS;
      // A fixed --max-tree-size is every worker's budget, whatever the index.
      const capacityBlocks =
        options.maxTreeSize !== undefined
          ? Math.max(1, Math.floor(options.maxTreeSize / blockChars))
          : (options.capacityBlocks ?? DEFAULT_CAPACITY_BLOCKS);
      return new BlockHashIndex({
        blockChars,
        capacityBlocks,
        ...(options.onEvict !== undefined ? { onEvict: options.onEvict } : {}),
      });
    }
  }
}
