import { checkPositiveInteger, keptOf } from "../tree/char-budget.js";
import { RadixTree } from "../tree/radix-tree.js";
import type { EvictionUnit, IndexPath, PrefixIndex } from "./prefix-index.js";

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
 *
 * Per model: KV is not shared across models or LoRA adapters, so texts routed for a named model
 * live under their own root branch of the worker's tree (the text prefixed with a model key), a
 * tree per (worker, model) in effect. They share the worker's one budget and one LRU order,
 * as the adapters of one engine share its one KV pool; a model nobody asks for any more is
 * evicted like any other cold prefix. Texts without a model key (the router passes none when
 * the fleet serves one model) are stored as they are.
 */
/** The approximate trees' name in logs and headers. */
const APPROXIMATE_INDEX = "approx";

export class ApproximateIndex implements PrefixIndex {
  readonly name = APPROXIMATE_INDEX;
  private readonly trees = new Map<string, RadixTree>();
  /**
   * Workers whose budget was set (an engine's capacity; only their fill means anything): that
   * budget and the reserve of their running requests (the tree keeps the difference).
   */
  private readonly budgeted = new Map<string, { budget: number; reserve: number }>();

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
    this.budgeted.delete(workerId);
  }

  match(
    text: string,
    model: string | undefined,
    workers: readonly { readonly id: string }[],
    out: number[],
  ): void {
    const key = modelKey(model);
    const keyed = key + text;
    for (let i = 0; i < workers.length; i++) {
      const tree = this.trees.get(workers[i]!.id);
      out[i] =
        tree === undefined || text.length === 0 ? 0 : Math.max(0, tree.match(keyed) - key.length);
    }
  }

  insert(workerId: string, model: string | undefined, text: string): void {
    if (text.length === 0) return;
    this.trees.get(workerId)?.insert(modelKey(model) + text);
  }

  truncate(workerId: string, model: string | undefined, text: string, keep: number): number {
    const key = modelKey(model);
    // A bad keep (negative, NaN) reaches the tree as it is, which refuses it.
    const cut = keep >= 0 ? key.length + keep : keep;
    return this.trees.get(workerId)?.truncate(key + text, cut) ?? 0;
  }

  setBudget(workerId: string, chars: number): number {
    // A set budget is what the engine can hold: kept on every insert, with no high-water slack,
    // less the room its running requests take (reserve), and evicted as the engine's block LRU
    // evicts: the end of the oldest conversation first (RadixTree.evict).
    const tree = this.trees.get(workerId);
    if (tree === undefined) return 0;
    checkPositiveInteger("ApproximateIndex", "budget", chars);
    const reserve = this.budgeted.get(workerId)?.reserve ?? 0;
    this.budgeted.set(workerId, { budget: chars, reserve });
    tree.evictTailFirst = true;
    return tree.setMaxChars(keptOf(chars, reserve), 1);
  }

  reserve(workerId: string, chars: number): number {
    const tree = this.trees.get(workerId);
    const set = this.budgeted.get(workerId);
    if (tree === undefined || set === undefined) return 0;
    const reserve = Math.max(0, chars);
    // Asked on every decision for every candidate: mostly unchanged, and then the tree is
    // already within that budget (every insert keeps it there).
    if (reserve === set.reserve) return 0;
    set.reserve = reserve;
    return tree.setMaxChars(keptOf(set.budget, reserve), 1);
  }

  size(workerId: string): number {
    return this.trees.get(workerId)?.charCount ?? 0;
  }

  fill(workerId: string): number | undefined {
    const tree = this.trees.get(workerId);
    if (tree === undefined || !this.budgeted.has(workerId)) return undefined;
    return Math.min(1, tree.charCount / tree.maxChars);
  }

  paths(workerId: string, maxChars: number): IndexPath[] | undefined {
    const tree = this.trees.get(workerId);
    if (tree === undefined) return undefined;
    return tree.leafPaths(maxChars).map(unkeyed);
  }

  evictionUnits(): Iterable<EvictionUnit> {
    return this.trees.values();
  }

  /** The worker's tree, for tests and benchmarks. */
  treeOf(workerId: string): RadixTree | undefined {
    return this.trees.get(workerId);
  }
}

/**
 * The root branch of a model's texts: "" without a model, else NUL, the name's length, ":" and the
 * name. The length makes the keys prefix-free (no model's key starts another's), and the NUL keeps
 * them apart from ordinary texts.
 */
export function modelKey(model: string | undefined): string {
  return model === undefined ? "" : `\u0000${model.length}:${model}`;
}

/** A tree's text back to its model and routed text (the inverse of modelKey + text). */
function unkeyed(keyed: string): IndexPath {
  if (keyed.charCodeAt(0) !== 0) return { model: undefined, text: keyed };
  const colon = keyed.indexOf(":");
  const length = Number(keyed.slice(1, colon));
  const start = colon + 1;
  return { model: keyed.slice(start, start + length), text: keyed.slice(start + length) };
}
