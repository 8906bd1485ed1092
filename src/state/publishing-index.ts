import type { EvictionUnit, PrefixIndex, PrepareRequest } from "../index/prefix-index.js";
import { boundedText, type StateOp } from "./state-op.js";

/**
 * Wraps whatever index the router built (approximate trees, a shared index, a hybrid) and hands
 * every routing decision to the other replicas: `insert` and `truncate` go to the inner index as
 * usual and also to `publish`, with the routed text cut to its first `maxTextChars` characters.
 * Peers apply those ops to their own inner index, never through this wrapper, so nothing echoes.
 *
 * Matching is untouched: the hot path costs one bounded slice and one queue push per decision.
 */
export class PublishingIndex implements PrefixIndex {
  constructor(
    readonly inner: PrefixIndex,
    private readonly publish: (op: StateOp) => void,
    private readonly maxTextChars: number,
  ) {}

  get name(): string {
    return this.inner.name;
  }

  addWorker(workerId: string): void {
    this.inner.addWorker(workerId);
  }

  removeWorker(workerId: string): void {
    this.inner.removeWorker(workerId);
  }

  match(
    text: string,
    model: string | undefined,
    workers: readonly { readonly id: string }[],
    out: number[],
  ): void {
    this.inner.match(text, model, workers, out);
  }

  insert(workerId: string, model: string | undefined, text: string): void {
    this.inner.insert(workerId, model, text);
    if (text.length === 0) return;
    const shared = boundedText(text, this.maxTextChars);
    this.publish(
      model === undefined
        ? { kind: "insert", worker: workerId, text: shared }
        : { kind: "insert", worker: workerId, model, text: shared },
    );
  }

  truncate(workerId: string, model: string | undefined, text: string, keep: number): number {
    const forgotten = this.inner.truncate(workerId, model, text, keep);
    const shared = boundedText(text, this.maxTextChars);
    // Peers only hold the shared part: nothing to take back when `keep` covers it.
    if (keep < shared.length) {
      this.publish(
        model === undefined
          ? { kind: "truncate", worker: workerId, text: shared, keep }
          : { kind: "truncate", worker: workerId, model, text: shared, keep },
      );
    }
    return forgotten;
  }

  setBudget(workerId: string, chars: number): number {
    return this.inner.setBudget(workerId, chars);
  }

  size(workerId: string): number {
    return this.inner.size(workerId);
  }

  evictionUnits(): Iterable<EvictionUnit> {
    return this.inner.evictionUnits();
  }

  // The inner index's asynchronous step and per-worker source (the hybrid index, --kv-events).
  prepare(
    request: PrepareRequest,
    workers: readonly { readonly id: string }[],
  ): Promise<void> | undefined {
    return this.inner.prepare?.(request, workers);
  }

  sourceOf(workerId: string): string {
    return this.inner.sourceOf?.(workerId) ?? this.inner.name;
  }
}
