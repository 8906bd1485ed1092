import { ApproximateIndex } from "./approximate-index.js";
import type { PrefixIndex } from "./prefix-index.js";
import { SharedIndex } from "./shared-index.js";

/** The base prefix indexes (--prefix-index); others (hybrid, publishing) wrap the one built here. */
export const PREFIX_INDEX_NAMES = ["approx", "shared"] as const;
export type PrefixIndexName = (typeof PREFIX_INDEX_NAMES)[number];

export interface BaseIndexOptions {
  /** Budget of each worker, in characters. */
  maxTreeSize?: number;
  /** Called with the characters evicted by any eviction (metrics). */
  onEvict?: (evictedChars: number) => void;
}

/**
 * approx: one radix tree per worker (a decision walks every candidate's tree);
 * shared: one tree per model whose nodes record which workers hold them (one walk per decision).
 * Both answer the same questions the same way (test/index/prefix-index.conformance.ts).
 */
export function createBaseIndex(name: PrefixIndexName, options: BaseIndexOptions): PrefixIndex {
  switch (name) {
    case "approx":
      return new ApproximateIndex(options);
    case "shared":
      return new SharedIndex(options);
  }
}
