import type { CircuitBreaker } from "./breaker.js";
import type { PrefillStart, WorkerLoad } from "./worker-load.js";

/** What one dispatched request adds to its worker's load until its lease is finished. */
export interface DispatchLoad {
  /** Characters of the request's routing text (the worker's active sequences). */
  readonly textChars: number;
  /** Characters of that text the worker probably has to prefill (not held before). */
  readonly uncachedChars: number;
  /** The engine's data-parallel rank it goes to, when the router chose one. */
  readonly rank?: number | undefined;
  /**
   * The priority the engine's scheduler gets in the request's body (--engine-priority), in the
   * router's higher-first scale; undefined when the body carries none from the router.
   */
  readonly enginePriority?: number | undefined;
  /**
   * Whether the router sees the first byte when the engine sends it (a stream it relays itself;
   * absent: yes). A non-streaming answer, or one another process relays (--data-plane nginx),
   * shows it only at the end, so its prefill is not known to be under way or over.
   */
  readonly firstByteVisible?: boolean;
}

/**
 * How an attempt ended, as far as the worker's record goes:
 * - `answered`: the worker's answer was relayed to its end: one more served; the breaker counts
 *   a 5xx as a failure, a 4xx as neutral (a bad request is not a bad worker), anything else as
 *   a success;
 * - `failed`: it says something about the worker (connection error, timeout, 5xx before the
 *   client saw anything, broken stream): a breaker failure;
 * - `neutral`: it says nothing about the worker (client gone or stalled, shutdown, 429): frees
 *   the half-open trial slot without counting.
 */
export type LeaseOutcome =
  | { readonly kind: "answered"; readonly status: number }
  | { readonly kind: "failed" }
  | { readonly kind: "neutral" };

export const FAILED: LeaseOutcome = { kind: "failed" };
export const NEUTRAL: LeaseOutcome = { kind: "neutral" };

/**
 * One request's hold on a worker, from dispatch to its end: what it adds to the worker's load
 * (in flight, per rank, per engine priority, active characters, pending prefill) is taken back exactly once, and its
 * outcome reaches the breaker and the served count exactly once, whichever path ends it (answer,
 * error, client abort or stall, retry, shutdown). After SGLang's router, whose WorkerLoadGuard
 * increments a worker's load when a request is routed and decrements it when the guard is dropped
 * (sgl-project/sglang sgl-model-gateway/src/core/worker.rs, formerly sgl-router); JavaScript has no drop, so the owner calls finish() on every
 * path, and calling it again is harmless.
 */
export class WorkerLease implements PrefillStart {
  private prefilling = true;
  private finished = false;
  /** When it was dispatched (epoch ms). */
  readonly sentAt = Date.now();

  /** Only Worker.dispatch makes one: the load is taken when the lease exists. */
  constructor(
    private readonly load: WorkerLoad,
    private readonly breaker: CircuitBreaker,
    private readonly taken: DispatchLoad,
  ) {
    load.addInFlight();
    load.activeChars += taken.textChars;
    if (taken.rank !== undefined) load.addRankInFlight(taken.rank, 1);
    load.pendingPrefillChars += taken.uncachedChars;
    load.pendingPrefillRequests += 1;
    if (taken.firstByteVisible !== false) load.visiblePrefillRequests += 1;
    load.prefilling.add(this);
    if (taken.enginePriority !== undefined) {
      load.enginePriorities.add(taken.enginePriority, 1);
      load.pendingPriorities.add(taken.enginePriority, 1);
    }
    breaker.onDispatch();
  }

  /**
   * The first body byte came back: prefill is over (engines stream a token only after it; a
   * non-streaming answer has its body only at the end). Idempotent; implied by finish().
   */
  firstByte(): void {
    if (!this.prefilling) return;
    this.load.learnPrefill(this.taken.uncachedChars, this.sentAt, Date.now());
    this.prefillOver();
  }

  private prefillOver(): void {
    if (!this.prefilling) return;
    this.prefilling = false;
    this.load.pendingPrefillChars -= this.taken.uncachedChars;
    this.load.pendingPrefillRequests -= 1;
    this.load.prefilling.delete(this);
    if (this.taken.enginePriority !== undefined)
      this.load.pendingPriorities.add(this.taken.enginePriority, -1);
    if (this.taken.firstByteVisible === false) return;
    this.load.visiblePrefillRequests -= 1;
    if (this.load.visiblePrefillRequests === 0) this.load.onPrefillIdle?.();
  }

  /** Gives the load back and records the outcome. Only the first call counts. */
  finish(outcome: LeaseOutcome): void {
    if (this.finished) return;
    this.finished = true;
    this.prefillOver();
    this.load.inFlight -= 1;
    this.load.activeChars -= this.taken.textChars;
    if (this.taken.rank !== undefined) this.load.addRankInFlight(this.taken.rank, -1);
    if (this.taken.enginePriority !== undefined)
      this.load.enginePriorities.add(this.taken.enginePriority, -1);
    if (outcome.kind === "failed") this.breaker.onFailure();
    else if (outcome.kind === "neutral") this.breaker.onNeutral();
    else {
      this.load.served += 1;
      if (outcome.status >= 500) this.breaker.onFailure();
      else if (outcome.status >= 400) this.breaker.onNeutral();
      else this.breaker.onSuccess();
    }
  }

  /** Whether finish() was called. */
  get done(): boolean {
    return this.finished;
  }
}
