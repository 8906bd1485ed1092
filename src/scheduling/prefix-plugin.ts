import type { PrefixIndex, PrepareRequest } from "../index/prefix-index.js";
import type { PolicyWorker } from "./policy.js";

/** What the prefix plugin reads of a request. */
export interface PrefixRequest extends PrepareRequest {
  readonly text: string;
  /** The index key (the model or adapter whose KV is kept apart). */
  readonly model?: string | undefined;
}

/**
 * The prefix index's work for the scheduler, in one place, at the request's stages (the shape of
 * GIE's prefix plugin: prepare data, score, pre-request, response complete):
 * - prepare: the index's asynchronous step before the decision (tokenizing, for the precise index);
 * - match: how much of the text each candidate probably holds (what prefix-reading plugins score);
 * - afterDispatch: the text goes into the chosen worker's entry at decision time, so a burst of
 *   requests with one new prefix converges on the worker that got the first of them (with the
 *   prefill it queues there, which replicas share with the decision);
 * - rejected: the chosen worker did not accept the request: the entry keeps only what it held;
 * - completed: the engine reported how much it held; what it evicted is forgotten;
 * - reserve: the room the worker's running requests take beyond their texts, kept free;
 * - truncate: the primitive both take back with.
 * The profile never sees the index, and the index never sees load.
 */
/**
 * Fills the unknown entries (NaN) of `fill`: a worker whose engine's capacity is not learned yet
 * is taken to hold as much as its peers whose capacity is (the mean of their budgets, each its
 * held characters over its fill), else 0. The capacity is read when a worker is added, and the
 * first decisions of a cold fleet went out before some of those reads came back: one worker's
 * fill already counted (0.5 after one request) against another's 0, so where the first tenants
 * landed hung on which engine had answered a few milliseconds sooner, and the hit rate of
 * identical runs parted from there.
 */
export function peerFill(
  candidates: readonly PolicyWorker[],
  fill: number[],
  size: (workerId: string) => number,
): void {
  let budgets = 0;
  let known = 0;
  for (let i = 0; i < candidates.length; i++) {
    const f = fill[i]!;
    // A fill of 0 or 1 (clamped) does not say the budget.
    if (!(f > 0 && f < 1)) continue;
    budgets += size(candidates[i]!.id) / f;
    known++;
  }
  for (let i = 0; i < candidates.length; i++) {
    if (!Number.isNaN(fill[i]!)) continue;
    fill[i] = known === 0 ? 0 : Math.min(1, (size(candidates[i]!.id) * known) / budgets);
  }
}

export class PrefixIndexPlugin {
  constructor(readonly index: PrefixIndex) {}

  /** The index's asynchronous step, when it has one and there is text; undefined otherwise. */
  prepare(
    request: PrefixRequest,
    candidates: () => readonly PolicyWorker[],
  ): Promise<void> | undefined {
    if (this.index.prepare === undefined) return undefined;
    if (request.text.length === 0 || request.tokenizeInput === undefined) return undefined;
    return this.index.prepare(request, candidates());
  }

  /**
   * out[i] = leading characters of the text candidates[i] probably holds; fill[i] = how full its
   * entry is (PrefixIndex.fill; 0 when the index does not know), see peerFill for a worker whose
   * capacity is not learned yet.
   */
  match(
    request: PrefixRequest,
    candidates: readonly PolicyWorker[],
    out: number[],
    fill?: number[],
  ): void {
    out.length = candidates.length;
    // Each entry as its engine's cache is now: room kept for the requests running there.
    if (this.index.reserve !== undefined) {
      for (const c of candidates) this.reserve(c.id, c.inFlight, c.runningReserveChars ?? 0);
    }
    this.index.match(request.text, request.model, candidates, out);
    if (fill === undefined) return;
    fill.length = candidates.length;
    const fillOf = this.index.fill;
    // An index that never knows fills (the precise one, from KV events): every entry 0.
    if (fillOf === undefined) {
      fill.fill(0);
      return;
    }
    let unknown = 0;
    for (let i = 0; i < candidates.length; i++) {
      const f = fillOf.call(this.index, candidates[i]!.id);
      if (f === undefined) unknown++;
      fill[i] = f ?? Number.NaN;
    }
    if (unknown > 0) peerFill(candidates, fill, (id) => this.index.size(id));
  }

  /**
   * The text routed to `workerId`: inserted into its entry. Returns the data-parallel rank of its
   * engine the index chose (its cache holds the most), when the index sees ranks.
   */
  afterDispatch(workerId: string, request: PrefixRequest, uncached?: number): number | undefined {
    this.index.insert(workerId, request.model, request.text, uncached);
    return this.index.rankOf?.(workerId);
  }

  /**
   * The worker runs `running` requests (this one included) that each hold `perRequest` characters
   * of its engine's KV beyond their texts: its entry keeps that much room (PrefixIndex.reserve).
   */
  reserve(workerId: string, running: number, perRequest: number): void {
    if (this.index.reserve === undefined || !(perRequest >= 0)) return;
    this.index.reserve(workerId, Math.max(0, running) * perRequest);
  }

  /** The worker did not accept the request: its entry keeps the `heldBefore` it held. */
  rejected(workerId: string, request: PrefixRequest, heldBefore: number): void {
    this.truncate(workerId, request, heldBefore);
  }

  /**
   * The worker's engine reports holding only about `engineHeld` characters of the text before
   * this request (it evicted the rest): whatever the index keeps below that point is gone from
   * the engine too (prefix caches are prefix-closed), so forget it; this request's own text was
   * just computed there and stays. Returns the characters forgotten (net of the text).
   */
  completed(workerId: string, request: PrefixRequest, engineHeld: number): number {
    const before = this.index.size(workerId);
    if (this.truncate(workerId, request, engineHeld) === 0) return 0;
    this.index.insert(workerId, request.model, request.text);
    return Math.max(0, before - this.index.size(workerId));
  }

  /** Forgets what the worker's entry holds of the text past `keep` characters; returns how much. */
  truncate(workerId: string, request: PrefixRequest, keep: number): number {
    return this.index.truncate(workerId, request.model, request.text, keep);
  }

  /** The index that answers for this worker (a hybrid index names its source). */
  sourceOf(workerId: string): string {
    return this.index.sourceOf?.(workerId) ?? this.index.name;
  }
}
