/**
 * Health checks and engine reads in flight at once, per kind. A fleet of 10,000 workers (the
 * worker file's cap), all unreachable, would otherwise open 10,000 connections at once every
 * interval: file descriptors run out and every pending connect holds memory until its timeout.
 * With this bound a pass over a large fleet takes longer instead (the checks of one worker are
 * never stacked, so a slow pass only delays that worker's next check).
 */
export const MAX_PROBES_IN_FLIGHT = 256;

/**
 * Probes started a second, per kind, paced evenly. Bounding only those in flight let workers
 * that answer at once (a refusal, a 404) cycle through the slots as fast as they answered: 9,999
 * such file entries made over 2,000 probes a second, most of a core, and their answers came
 * back in clumps that held the event loop for hundreds of milliseconds. Paced, probes cost a
 * bounded share of a core whatever the fleet; a fleet over INTERVAL x this rate is checked less
 * often than every interval.
 */
export const MAX_PROBE_STARTS_PER_SEC = 500;
/** Starts allowed back to back after a quiet spell. */
const START_BURST = 16;

/**
 * A FIFO semaphore: at most `limit` calls of run() in progress at once, and at most
 * `startsPerSec` of them started a second (a token bucket of START_BURST).
 */
export class ProbeSlots {
  private active = 0;
  private waiting: (() => void)[] = [];
  /** The next waiter in `waiting` (shifting a queue of 10,000 is quadratic). */
  private head = 0;
  private tokens = START_BURST;
  private refilledAt: number;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly limit = MAX_PROBES_IN_FLIGHT,
    private readonly startsPerSec = MAX_PROBE_STARTS_PER_SEC,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.refilledAt = now();
  }

  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.queued === 0 && this.active < this.limit && this.takeToken()) {
      this.active++;
    } else {
      await new Promise<void>((resolve) => {
        this.waiting.push(resolve);
        this.grant();
      });
    }
    try {
      return await task();
    } finally {
      this.active--;
      this.grant();
    }
  }

  /** Calls in progress (tests, metrics). */
  get inFlight(): number {
    return this.active;
  }

  /** Calls waiting for a slot or for their turn to start. */
  get queued(): number {
    return this.waiting.length - this.head;
  }

  /** Starts waiters while a slot and a token are free; else comes back when a token is due. */
  private grant(): void {
    while (this.queued > 0 && this.active < this.limit) {
      if (!this.takeToken()) {
        this.wakeForToken();
        return;
      }
      this.active++;
      const next = this.waiting[this.head]!;
      this.head++;
      if (this.head === this.waiting.length) {
        this.waiting = [];
        this.head = 0;
      } else if (this.head >= 1024 && this.head * 2 >= this.waiting.length) {
        this.waiting = this.waiting.slice(this.head);
        this.head = 0;
      }
      next();
    }
  }

  private takeToken(): boolean {
    if (this.startsPerSec <= 0) return true;
    const now = this.now();
    this.tokens = Math.min(
      START_BURST,
      this.tokens + ((now - this.refilledAt) * this.startsPerSec) / 1000,
    );
    this.refilledAt = now;
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }

  private wakeForToken(): void {
    if (this.timer !== undefined) return;
    const dueMs = Math.max(1, Math.ceil(((1 - this.tokens) * 1000) / this.startsPerSec));
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.grant();
    }, dueMs);
    // Referenced: probes waiting for their turn may be all a caller awaits (a first probe before
    // anything else holds the event loop open); it only runs while probes wait.
  }
}

/** The share of an interval a pass of health checks or engine reads is spread over. */
export const SPREAD_SHARE = 0.8;

/** Workers whose checks start together in a pass spread over its span (spreadOver). */
const SPREAD_BATCH = 64;

/**
 * Runs `start` for every item, in batches of SPREAD_BATCH spaced evenly over `spanMs`, and
 * resolves once all have ended. A pass over 10,000 workers started at once ran as fast as the
 * slots allowed: seconds of back-to-back probe answers on the event loop each interval, legitimate
 * requests waiting behind them. Spread, the same work is a steady trickle. A fleet of one batch
 * starts at once, as before. `stopped` is asked before each batch: a stopped checker starts none.
 */
export async function spreadOver<T>(
  items: readonly T[],
  spanMs: number,
  start: (item: T) => Promise<void>,
  stopped: () => boolean = () => false,
): Promise<void> {
  const batches = Math.ceil(items.length / SPREAD_BATCH);
  const gapMs = batches > 1 ? spanMs / batches : 0;
  const started: Promise<void>[] = [];
  for (let b = 0; b < batches; b++) {
    if (b > 0 && gapMs > 0) {
      await new Promise<void>((resolve) => setTimeout(resolve, gapMs).unref());
    }
    if (stopped()) break;
    for (const item of items.slice(b * SPREAD_BATCH, (b + 1) * SPREAD_BATCH)) {
      started.push(start(item));
    }
  }
  await Promise.all(started);
}
