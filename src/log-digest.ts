import type { Logger } from "./logger.js";

export interface LogDigestOptions {
  /** The level of the event's line and of the summaries. */
  level: "warn" | "info";
  /** The line of one event. */
  message: string;
  /** The summary's line, for `count` events held back. */
  summary(count: number): string;
  /** A summary at most this often (ms); default 5 s. */
  everyMs?: number;
  /** Events named in a summary (the first of its window); default 5. */
  sample?: number;
}

/**
 * One kind of per-worker log line that can come in thousands at once (a worker file or discovery
 * list of 10k unreachable entries wrote 10k warn lines, about 3.3 MB of synchronous output, while
 * requests waited). The first event of a quiet spell is written as it comes; the ones that follow
 * within `everyMs` are written at debug, and counted into one summary line at the window's end
 * naming the first few, so the operator still sees which workers and why. A flood therefore
 * costs a line every `everyMs`; a single event reads as before.
 */
export class LogDigest {
  private timer: NodeJS.Timeout | undefined;
  private held = 0;
  private sampled: Record<string, unknown>[] = [];

  constructor(
    private readonly logger: Logger,
    private readonly options: LogDigestOptions,
  ) {}

  note(fields: Record<string, unknown>): void {
    const { logger, options } = this;
    if (this.timer === undefined) {
      logger[options.level](fields, options.message);
      this.arm();
      return;
    }
    logger.debug(fields, options.message);
    this.held++;
    if (this.sampled.length < (options.sample ?? 5)) this.sampled.push(fields);
  }

  /** Writes what is held now and ends the window (at shutdown: nothing is left unsaid). */
  flush(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    this.summarize();
  }

  private arm(): void {
    this.timer = setTimeout(() => this.windowEnded(), this.options.everyMs ?? 5000);
    this.timer.unref();
  }

  private windowEnded(): void {
    this.timer = undefined;
    // A flood still under way: the next window is held back too; a quiet one ends the digest.
    if (this.summarize()) this.arm();
  }

  /** Writes the summary of the held events; false when there were none. */
  private summarize(): boolean {
    const { held, sampled, options } = this;
    if (held === 0) return false;
    this.held = 0;
    this.sampled = [];
    this.logger[options.level](
      { count: held, window_ms: options.everyMs ?? 5000, first: sampled },
      options.summary(held),
    );
    return true;
  }
}
