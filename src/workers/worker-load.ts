import { PriorityTally } from "./priority-tally.js";

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
  /** In-flight requests per data-parallel rank (index = rank), for those sent to a chosen rank. */
  readonly rankInFlight: number[] = [];
  /** In-flight requests by the priority their engine got (--engine-priority), for those sent one. */
  readonly enginePriorities = new PriorityTally();
  /** Requests that completed with a response from the worker. */
  served = 0;

  addRankInFlight(rank: number, delta: number): void {
    while (this.rankInFlight.length <= rank) this.rankInFlight.push(0);
    this.rankInFlight[rank] = Math.max(0, this.rankInFlight[rank]! + delta);
  }
}
