import { RadixTree } from "../tree/radix-tree.js";
import type { EvictionUnit, PrefixIndex } from "./prefix-index.js";

export interface ApproximateIndexOptions {
  /** Budget of each worker's tree, in characters. */
  maxTreeSize?: number;
  /** Called with the characters evicted by any tree (metrics). */
  onEvict?: (evictedChars: number) => void;
}

/**
 * One character radix tree per worker, holding the routing texts the router sent there: the
 * router's own guess of each worker's prefix cache (the SGLang router's approximate index).
 * Matching costs one walk per worker.
 */
export class ApproximateIndex implements PrefixIndex {
  readonly name = "approx";
  private readonly trees = new Map<string, RadixTree>();

  constructor(private readonly options: ApproximateIndexOptions = {}) {}

  addWorker(workerId: string): void {
    if (this.trees.has(workerId)) return;
    const { maxTreeSize, onEvict } = this.options;
    this.trees.set(
      workerId,
      new RadixTree({
        ...(maxTreeSize !== undefined ? { maxChars: maxTreeSize } : {}),
        ...(onEvict !== undefined ? { onEvict } : {}),
      }),
    );
  }

  removeWorker(workerId: string): void {
    this.trees.get(workerId)?.clear();
    this.trees.delete(workerId);
  }

  match(
    text: string,
    _model: string | undefined,
    workers: readonly { readonly id: string }[],
    out: number[],
  ): void {
    for (let i = 0; i < workers.length; i++) {
      const tree = this.trees.get(workers[i]!.id);
      out[i] = tree === undefined || text.length === 0 ? 0 : tree.match(text);
    }
  }

  insert(workerId: string, _model: string | undefined, text: string): void {
    this.trees.get(workerId)?.insert(text);
  }

  truncate(workerId: string, _model: string | undefined, text: string, keep: number): number {
    return this.trees.get(workerId)?.truncate(text, keep) ?? 0;
  }

  setBudget(workerId: string, chars: number): number {
    // A set budget is what the engine can hold: kept on every insert, with no high-water slack.
    return this.trees.get(workerId)?.setMaxChars(chars, 1) ?? 0;
  }

  size(workerId: string): number {
    return this.trees.get(workerId)?.charCount ?? 0;
  }

  evictionUnits(): Iterable<EvictionUnit> {
    return this.trees.values();
  }

  /** The worker's tree, for tests and benchmarks. */
  treeOf(workerId: string): RadixTree | undefined {
    return this.trees.get(workerId);
  }
}
