import { timerMs } from "./abort-reasons.js";

/** One watched stream: the relay sets `stirred` on every chunk; `onIdle` says whether it gave up. */
export interface IdleEntry {
  stirred: boolean;
  /** When the sweep last saw it stirred (epoch ms); set by the sweep. */
  quietSince: number;
  /** Silence reached the limit: return false to keep waiting (a client not reading, say). */
  onIdle(): boolean;
}

/**
 * The idle limit (--idle-timeout-secs) of every open stream, kept by one timer instead of one per
 * stream re-armed on every chunk: a chunk only sets a flag, and a sweep every eighth of the limit
 * (at most a second apart) ends the streams silent for the whole limit. A stream is ended after
 * at least `limitMs` of silence and at most two sweep periods more. The timer runs only while a
 * stream is watched, and never holds the process open.
 */
export class IdleSweep {
  private readonly entries = new Set<IdleEntry>();
  private readonly periodMs: number;
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly limitMs: number) {
    this.periodMs = Math.min(1000, Math.max(5, Math.floor(limitMs / 8)));
  }

  add(entry: IdleEntry): void {
    entry.quietSince = Date.now();
    this.entries.add(entry);
    if (this.timer === undefined) {
      this.timer = setInterval(() => this.sweep(), timerMs(this.periodMs));
      this.timer.unref();
    }
  }

  delete(entry: IdleEntry): void {
    this.entries.delete(entry);
    if (this.entries.size === 0 && this.timer !== undefined) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }

  /** Streams watched now (for tests and the memory bench). */
  get size(): number {
    return this.entries.size;
  }

  private sweep(): void {
    const now = Date.now();
    for (const entry of this.entries) {
      if (entry.stirred) {
        entry.stirred = false;
        entry.quietSince = now;
      } else if (now - entry.quietSince >= this.limitMs) {
        // Given up: not asked again (its relay ends shortly). Waiting: a whole limit more.
        if (entry.onIdle()) this.delete(entry);
        else entry.quietSince = now;
      }
    }
  }
}
