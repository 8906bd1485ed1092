import { DEFAULT_MAX_CHARS } from "../tree/char-budget.js";
import { DEFAULT_CHARS_PER_TOKEN } from "./chars-per-token.js";
import type { Worker } from "./worker.js";

/** Budget of a tree whose worker's capacity is unknown (--max-tree-size auto): 2^26. */
export const FALLBACK_TREE_BUDGET = DEFAULT_MAX_CHARS;

/**
 * A learned budget moves only when characters per token moved it by more than this share: the
 * running average drifts by a few tenths of a percent from one request to the next, and each
 * move would evict a few prompts' worth of tree at whatever instant the poll falls (issue 27).
 */
export const BUDGET_HYSTERESIS = 0.02;

/**
 * The characters a worker's engine can hold: KV capacity (tokens) × characters per token ×
 * --tree-capacity-factor, at least 1. Characters per token is learned per worker (4 until then).
 */
export function learnedTreeBudget(
  capacityTokens: number,
  charsPerToken: number,
  factor: number,
): number {
  const perToken =
    Number.isFinite(charsPerToken) && charsPerToken > 0 ? charsPerToken : DEFAULT_CHARS_PER_TOKEN;
  return Math.min(
    Number.MAX_SAFE_INTEGER,
    Math.max(1, Math.floor(capacityTokens * perToken * factor)),
  );
}

/**
 * What the budgets are applied to: the prefix index (index/prefix-index.ts PrefixIndex.setBudget,
 * which returns the characters it evicted). Named here so that workers/ never imports index/.
 */
export interface BudgetedIndex {
  setBudget(workerId: string, chars: number): number;
}

/**
 * Sizes each worker's prefix tree. A number (--max-tree-size N) fixes every budget. "auto" sets
 * each worker's budget from its engine's KV capacity, re-evaluated after every read of its signals
 * (capacity or characters per token may have changed) through PrefixIndex.setBudget, which keeps
 * the tree at that budget on every insert, when the capacity changed or the budget moved by more
 * than BUDGET_HYSTERESIS. Until a capacity is known the tree keeps 2^26. Once
 * learned, the capacity stays the budget even if the engine later stops answering: a GPU's KV pool
 * does not grow while nobody looks, and regrowing to 2^26 would again claim what it evicted.
 */
export class TreeBudgets {
  /** The capacity each worker's budget was last set from. */
  private readonly from = new WeakMap<Worker, number>();

  constructor(
    private readonly index: BudgetedIndex,
    private readonly setting: number | "auto",
    private readonly factor: number,
  ) {}

  /** The budget every tree starts with. */
  get initial(): number {
    return this.setting === "auto" ? FALLBACK_TREE_BUDGET : this.setting;
  }

  /** Records the starting budget on a new worker. */
  added(worker: Worker): void {
    worker.treeBudget = this.initial;
  }

  /** Re-evaluates one worker's budget from its signals; returns the characters evicted. */
  update(worker: Worker): number {
    if (this.setting !== "auto") return 0;
    const capacity = worker.signals.lastCapacity;
    if (capacity === undefined) return 0;
    const budget = learnedTreeBudget(capacity, worker.charsPerToken, this.factor);
    if (budget === worker.treeBudget) return 0;
    const current = worker.treeBudget;
    if (
      current !== undefined &&
      this.from.get(worker) === capacity &&
      Math.abs(budget - current) <= current * BUDGET_HYSTERESIS
    ) {
      return 0;
    }
    this.from.set(worker, capacity);
    worker.treeBudget = budget;
    return this.index.setBudget(worker.id, budget);
  }
}
