/**
 * Health checks and engine reads in flight at once, per kind. A fleet of 10,000 workers (the
 * worker file's cap), all unreachable, would otherwise open 10,000 connections at once every
 * interval: file descriptors run out and every pending connect holds memory until its timeout.
 * With this bound a pass over a large fleet takes longer instead (the checks of one worker are
 * never stacked, so a slow pass only delays that worker's next check).
 */
export const MAX_PROBES_IN_FLIGHT = 256;

/** A FIFO semaphore: at most `limit` calls of run() in progress at once. */
export class ProbeSlots {
  private active = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(private readonly limit = MAX_PROBES_IN_FLIGHT) {}

  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.active >= this.limit) {
      await new Promise<void>((resolve) => this.waiting.push(resolve));
    } else {
      this.active++;
    }
    try {
      return await task();
    } finally {
      const next = this.waiting.shift();
      // The slot passes straight to the next waiter.
      if (next !== undefined) next();
      else this.active--;
    }
  }

  /** Calls in progress and waiting (tests, metrics). */
  get inFlight(): number {
    return this.active;
  }

  get queued(): number {
    return this.waiting.length;
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
