import { RouterError, retryAfterSecs } from "../errors.js";

/** Bounds on reading large bodies at once (see docs/reliability.md, "Reading request bodies"). */
export interface LargeBodyLimits {
  /** --large-body-bytes: a body declared larger, or once it has grown larger, is large. */
  bytes: number;
  /** --max-large-body-reads: large bodies read at once (0 = no gate). */
  reads: number;
  /** --large-body-wait-secs: how long a large body may wait for its turn. */
  waitMs: number;
  /** Large bodies that may wait at once; one more is refused at once (default MAX_WAITING). */
  maxWaiting?: number;
}

/**
 * Large bodies waiting at once. A waiting body holds what its socket had read before the pause
 * (at most about 128 KiB, read-body.ts): the line's bound keeps that outside the body budget at
 * a few tens of MB however many connections declare large bodies.
 */
export const MAX_WAITING = 256;

/** A turn to read a large body; `leave()` gives it back (once; later calls do nothing). */
export interface GateTurn {
  leave(): void;
}

/** A wait for a turn; `cancel()` gives up its place (the client went away). */
export interface GateWait {
  readonly turn: Promise<GateTurn>;
  cancel(): void;
}

interface Waiter {
  grant(turn: GateTurn): void;
  timer: NodeJS.Timeout;
}

/**
 * At most `reads` large request bodies are read at once; the others wait their turn, first come
 * first served, with their sockets paused (read-body.ts): the kernel's receive window fills and the
 * client's sends stop, so a waiting upload costs neither side any CPU. Sixteen 60 MB bodies read
 * side by side had each socket's bytes handled in every turn of the event loop, so a small request
 * or /health waited behind all of them; in turns, only `reads` bodies' bytes stand in its way and
 * only `reads` bodies' buffers fill at once. Small bodies never wait here.
 */
export class LargeBodyGate {
  private reading = 0;
  private readonly waiters = new Set<Waiter>();

  constructor(readonly limits: LargeBodyLimits) {}

  /** Large bodies being read now. */
  get active(): number {
    return this.reading;
  }

  /** Large bodies waiting for their turn. */
  get waiting(): number {
    return this.waiters.size;
  }

  /** Whether a body of `bytes` (declared, or read so far) is large. */
  isLarge(bytes: number): boolean {
    return bytes > this.limits.bytes;
  }

  /** A turn at once, or undefined when every one is taken (or bodies already wait: FIFO). */
  tryEnter(): GateTurn | undefined {
    if (this.reading >= this.limits.reads || this.waiters.size > 0) return undefined;
    return this.turn();
  }

  /**
   * Waits for a turn, at most --large-body-wait-secs: past it the wait ends with 503
   * large_body_busy and a Retry-After.
   */
  wait(): GateWait {
    if (this.waiters.size >= (this.limits.maxWaiting ?? MAX_WAITING)) {
      return { turn: Promise.reject(this.busy(true)), cancel: () => {} };
    }
    let waiter: Waiter | undefined;
    const turn = new Promise<GateTurn>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters.delete(w);
        reject(this.busy());
      }, this.limits.waitMs);
      const w: Waiter = { grant: resolve, timer };
      waiter = w;
      this.waiters.add(w);
    });
    return {
      turn,
      cancel: () => {
        if (waiter === undefined || !this.waiters.delete(waiter)) return;
        clearTimeout(waiter.timer);
      },
    };
  }

  private turn(): GateTurn {
    this.reading++;
    let left = false;
    return {
      leave: () => {
        if (left) return;
        left = true;
        this.reading--;
        this.next();
      },
    };
  }

  /** Hands a freed turn to the first waiter. */
  private next(): void {
    if (this.reading >= this.limits.reads) return;
    const first = this.waiters.values().next();
    if (first.done === true) return;
    const waiter = first.value;
    this.waiters.delete(waiter);
    clearTimeout(waiter.timer);
    waiter.grant(this.turn());
  }

  private busy(lineFull = false): RouterError {
    // A turn frees as soon as a large body has arrived: a few seconds is a fair wait.
    const secs = retryAfterSecs(this.limits.waitMs, 5);
    const why = lineFull
      ? `and ${this.waiters.size} more already wait for a turn`
      : `and this one waited ${this.limits.waitMs / 1000} s for its turn (--large-body-wait-secs)`;
    return new RouterError(
      "large_body_busy",
      `The router is reading its limit of ${this.limits.reads} large request bodies at once (--max-large-body-reads), ${why}; retry after ${secs} s.`,
      secs,
    );
  }
}
