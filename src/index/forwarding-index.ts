import type { EvictionUnit, IndexPath, PrefixIndex, PrepareRequest } from "./prefix-index.js";

/**
 * A PrefixIndex that wraps another and hands every call to it: the base of the index wrappers
 * (the hybrid index around the base index, the publishing index around either), so that each
 * overrides only what it changes and a method added to PrefixIndex reaches the inner index
 * through every layer of the stack, instead of being dropped by a wrapper that forgot it.
 */
export class ForwardingIndex implements PrefixIndex {
  constructor(readonly inner: PrefixIndex) {}

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

  insert(workerId: string, model: string | undefined, text: string, uncached?: number): void {
    this.inner.insert(workerId, model, text, uncached);
  }

  truncate(workerId: string, model: string | undefined, text: string, keep: number): number {
    return this.inner.truncate(workerId, model, text, keep);
  }

  setBudget(workerId: string, chars: number): number {
    return this.inner.setBudget(workerId, chars);
  }

  reserve(workerId: string, chars: number): number {
    return this.inner.reserve?.(workerId, chars) ?? 0;
  }

  size(workerId: string): number {
    return this.inner.size(workerId);
  }

  fill(workerId: string): number | undefined {
    return this.inner.fill?.(workerId);
  }

  paths(workerId: string, maxChars: number): IndexPath[] | undefined {
    return this.inner.paths?.(workerId, maxChars);
  }

  evictionUnits(): Iterable<EvictionUnit> {
    return this.inner.evictionUnits();
  }

  // Undefined when the inner index has nothing to wait for: the decider then adds no await.
  prepare(
    request: PrepareRequest,
    workers: readonly { readonly id: string }[],
  ): Promise<void> | undefined {
    return this.inner.prepare?.(request, workers);
  }

  sourceOf(workerId: string): string {
    return this.inner.sourceOf?.(workerId) ?? this.inner.name;
  }

  rankOf(workerId: string): number | undefined {
    return this.inner.rankOf?.(workerId);
  }
}
