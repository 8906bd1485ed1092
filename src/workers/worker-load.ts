import { PriorityTally } from "./priority-tally.js";

/** A request waiting for its first byte: when it was sent (epoch ms). */
export interface PrefillStart {
  readonly sentAt: number;
}

/** Prompts shorter than this teach no prefill speed (WorkerLoad.learnPrefill). */
const MIN_TEACHING_CHARS = 1024;
/** Each sample moves the learned speed by 1/RATE_WEIGHT of the difference. */
const RATE_WEIGHT = 8;

/**
 * This router's own load on one worker. Written only by the worker's leases (lease.ts); the
 * Worker exposes it read-only.
 */
export class WorkerLoad {
  /** Requests dispatched and not finished (exact). */
  inFlight = 0;
  /** The most `inFlight` has been since the last markInFlightPeak (an engine read's span). */
  inFlightPeak = 0;
  /** The most `inFlight` has been since the markInFlightPeak before the last (the last read's). */
  inFlightPeakPrev = 0;
  /**
   * The most `inFlight` has been since the read before the first one that showed the engine's
   * current gauges (Worker.inFlightMostSinceGauges).
   */
  inFlightPeakGauges = 0;

  /** One more request in flight: every peak sees it. */
  addInFlight(): void {
    this.inFlight += 1;
    if (this.inFlight > this.inFlightPeak) this.inFlightPeak = this.inFlight;
    if (this.inFlight > this.inFlightPeakPrev) this.inFlightPeakPrev = this.inFlight;
    if (this.inFlight > this.inFlightPeakGauges) this.inFlightPeakGauges = this.inFlight;
  }
  /** Routing-text characters of those requests (dispatch to end). */
  activeChars = 0;
  /** Uncached prompt characters of the requests with no first byte back yet. */
  pendingPrefillChars = 0;
  /** How many requests pendingPrefillChars adds up. */
  pendingPrefillRequests = 0;
  /** Those of them whose first byte the router sees when the engine sends it (lease.ts). */
  visiblePrefillRequests = 0;
  /** In-flight requests per data-parallel rank (index = rank), for those sent to a chosen rank. */
  readonly rankInFlight: number[] = [];
  /** In-flight requests by the priority their engine got (--engine-priority), for those sent one. */
  readonly enginePriorities = new PriorityTally();
  /** The same for those with no first byte back yet (pendingPrefillRequests). */
  readonly pendingPriorities = new PriorityTally();
  /** The requests pendingPrefillRequests counts, oldest dispatch first (a Set keeps that order). */
  readonly prefilling = new Set<PrefillStart>();
  /**
   * Uncached characters the engine prefills a millisecond as this router saw it, learned at first
   * bytes (learnPrefill); 0 until a long enough prompt taught it.
   */
  prefillCharsPerMs = 0;
  /**
   * A request of `uncachedChars` sent at `sentAt` got its first byte at `now`: the engine
   * prefilled that much in at most that time. A sample counts the wait for the step under way
   * (and anything queued ahead, and the round trip), so it errs slow, and an estimate that errs
   * slow counts more of the prefill as still ahead (prefillAheadOf), toward the estimate without
   * it (measured from the previous first byte there instead, two prompts computed in one step,
   * their first bytes a moment apart, would teach a speed far above the engine's). Short prompts
   * teach nothing (a step's floor, not its compute, decides their time).
   */
  learnPrefill(uncachedChars: number, sentAt: number, now: number): void {
    if (uncachedChars < MIN_TEACHING_CHARS) return;
    const sample = uncachedChars / Math.max(1, now - sentAt);
    this.prefillCharsPerMs =
      this.prefillCharsPerMs === 0
        ? sample
        : this.prefillCharsPerMs + (sample - this.prefillCharsPerMs) / RATE_WEIGHT;
  }

  /**
   * The uncached characters of this router's prompts still in prefill there that a request the
   * engine gets at `priority` finds ahead of it, when every one of them is below `priority`: the
   * engine's priority scheduler puts it before all that wait, so only the prefill under way is
   * ahead (a chunked prompt under way is never preempted and goes on first in the next step:
   * SGLang's scheduler.py keeps `chunked_req` out of the running batch and
   * schedule_policy.py `PrefillAdder.add_chunked_req` adds it before any waiting request).
   * Estimated as those characters less what the engine computed since the oldest was sent (it
   * prefills before it decodes). Undefined when some of them is not below `priority`.
   */
  prefillAheadOf(priority: number, now: number): number | undefined {
    if (this.pendingPrefillRequests === 0) return 0;
    if (this.pendingPriorities.below(priority) < this.pendingPrefillRequests) return undefined;
    const oldest = this.prefilling.values().next().value;
    const since = oldest === undefined ? 0 : Math.max(0, now - oldest.sentAt);
    return Math.max(0, this.pendingPrefillChars - this.prefillCharsPerMs * since);
  }
  /**
   * Called when the last of this router's prompts in prefill there whose first byte it sees is
   * done (admission's pacing).
   */
  onPrefillIdle: (() => void) | undefined;
  /** Requests that completed with a response from the worker. */
  served = 0;

  addRankInFlight(rank: number, delta: number): void {
    while (this.rankInFlight.length <= rank) this.rankInFlight.push(0);
    this.rankInFlight[rank] = Math.max(0, this.rankInFlight[rank]! + delta);
  }
}
