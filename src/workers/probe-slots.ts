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
