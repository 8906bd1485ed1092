import { ForwardingIndex } from "../index/forwarding-index.js";
import type { PrefixIndex } from "../index/prefix-index.js";
import { boundedText, type StateOp } from "./state-op.js";

/**
 * Wraps whatever index the router built (approximate trees, a shared index, a hybrid) and hands
 * every routing decision to the other replicas: `insert` and `truncate` go to the inner index as
 * usual and also to `publish`, with the routed text cut to its first `maxTextChars` characters.
 * Peers apply those ops to their own inner index, never through this wrapper, so nothing echoes.
 *
 * Everything else (matching, the hybrid index's prepare, sourceOf and rankOf) is the inner
 * index's (ForwardingIndex): the hot path costs one bounded slice and one queue push per decision.
 */
export class PublishingIndex extends ForwardingIndex {
  constructor(
    inner: PrefixIndex,
    private readonly publish: (op: StateOp) => void,
    private readonly maxTextChars: number,
  ) {
    super(inner);
  }

  override insert(
    workerId: string,
    model: string | undefined,
    text: string,
    uncached?: number,
  ): void {
    this.inner.insert(workerId, model, text, uncached);
    if (text.length === 0) return;
    const shared = boundedText(text, this.maxTextChars);
    // The prefill this decision queued goes with it: peers count it at once (peer-pending.ts).
    const work = uncached !== undefined && uncached > 0 ? { uncached } : {};
    this.publish(
      model === undefined
        ? { kind: "insert", worker: workerId, text: shared, ...work }
        : { kind: "insert", worker: workerId, model, text: shared, ...work },
    );
  }

  override truncate(
    workerId: string,
    model: string | undefined,
    text: string,
    keep: number,
  ): number {
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
}
