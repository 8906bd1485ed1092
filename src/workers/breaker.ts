export type BreakerState = "closed" | "open" | "half_open";

export interface BreakerOptions {
  /** Consecutive failures that open the circuit. */
  failureThreshold: number;
  /** How long the circuit stays open before a trial request is let through. */
  openMs: number;
  /** Consecutive trial successes that close it again. */
  successThreshold: number;
  now?: () => number;
}

/** What the rest of the router reads of a breaker; only a worker's leases report outcomes. */
export interface BreakerView {
  readonly state: BreakerState;
  admits(): boolean;
  readonly consecutiveFailures: number;
}

/**
 * Passive per-worker circuit breaker. Only failures that say something about the worker count
 * (connection errors, timeouts, 5xx); the caller never reports a 4xx as a failure, because a bad
 * request is not a bad worker. Half-open admits one trial request at a time.
 *
 * Not opossum or cockatiel: those wrap a function call and count its outcome, while here the
 * outcome of one request is known only at the end of a stream, a 4xx is neutral, and the policy
 * must ask "does it admit a request?" without making one; this is about 60 lines.
 */
export class CircuitBreaker implements BreakerView {
  private current: BreakerState = "closed";
  private failures = 0;
  private successes = 0;
  private openedAt = 0;
  private trialInFlight = false;
  private readonly now: () => number;

  constructor(private readonly options: BreakerOptions) {
    this.now = options.now ?? Date.now;
  }

  get state(): BreakerState {
    if (this.current === "open" && this.now() - this.openedAt >= this.options.openMs) {
      this.current = "half_open";
      this.successes = 0;
      this.trialInFlight = false;
    }
    return this.current;
  }

  /** Whether a new request may be sent now. */
  admits(): boolean {
    const state = this.state;
    return state === "closed" || (state === "half_open" && !this.trialInFlight);
  }

  /** A request was dispatched to the worker (claims the half-open trial slot). */
  onDispatch(): void {
    if (this.state === "half_open") this.trialInFlight = true;
  }

  onSuccess(): void {
    this.failures = 0;
    if (this.state === "half_open") {
      this.trialInFlight = false;
      this.successes += 1;
      if (this.successes >= this.options.successThreshold) this.current = "closed";
    }
  }

  onFailure(): void {
    const state = this.state;
    if (state === "half_open") {
      this.open();
      return;
    }
    this.failures += 1;
    if (state === "closed" && this.failures >= this.options.failureThreshold) this.open();
  }

  /** A request ended without saying anything about the worker (client abort, 4xx): free the trial slot. */
  onNeutral(): void {
    this.trialInFlight = false;
  }

  get consecutiveFailures(): number {
    return this.failures;
  }

  private open(): void {
    this.current = "open";
    this.openedAt = this.now();
    this.failures = 0;
    this.successes = 0;
    this.trialInFlight = false;
  }
}
