import { RouterError } from "../errors.js";
import type { Cancel } from "./cancel.js";
import { ClientGoneError } from "./client-gone.js";

interface Waiter {
  grant: () => void;
  fail: (err: Error) => void;
}

/**
 * Bounds the requests forwarded at once (--max-concurrent-requests). Extra requests wait in a
 * bounded FIFO queue: a full queue answers 429 at once, a wait past the queue timeout answers 408,
 * a client that leaves while waiting just leaves the queue.
 */
export class Admission {
  private active = 0;
  private readonly queue: Waiter[] = [];

  constructor(
    private readonly maxConcurrent: number,
    private readonly queueSize: number,
    private readonly queueTimeoutMs: number,
  ) {}

  get enabled(): boolean {
    return this.maxConcurrent > 0;
  }

  get waiting(): number {
    return this.queue.length;
  }

  get running(): number {
    return this.active;
  }

  /** Resolves with a release function once the request may go; call release exactly once. */
  acquire(signal?: Cancel): Promise<() => void> {
    if (!this.enabled) return Promise.resolve(noop);
    if (this.active < this.maxConcurrent) {
      this.active += 1;
      return Promise.resolve(this.releaser());
    }
    if (this.queue.length >= this.queueSize) {
      return Promise.reject(
        new RouterError(
          "too_many_requests",
          `Router is at capacity (${this.maxConcurrent} running, ${this.queueSize} waiting); retry later.`,
        ),
      );
    }
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        grant: () => {
          settle();
          resolve(this.releaser());
        },
        fail: (err) => {
          settle();
          reject(err);
        },
      };
      const timer = setTimeout(
        () =>
          waiter.fail(
            new RouterError(
              "queue_timeout",
              `Request waited over ${this.queueTimeoutMs} ms for a free slot.`,
            ),
          ),
        this.queueTimeoutMs,
      );
      const onAbort = () => waiter.fail(new ClientGoneError());
      const settle = () => {
        clearTimeout(timer);
        signal?.off("abort", onAbort);
        const index = this.queue.indexOf(waiter);
        if (index >= 0) this.queue.splice(index, 1);
      };
      signal?.once("abort", onAbort);
      this.queue.push(waiter);
    });
  }

  private releaser(): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.queue[0];
      // Hand the slot straight to the next waiter, so `active` never dips below the limit in between.
      if (next) next.grant();
      else this.active -= 1;
    };
  }
}

function noop(): void {}
