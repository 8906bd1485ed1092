import type { Clock } from "./clock.js";

/**
 * A clock that only moves when told to; timers fire in time order during advance(). The
 * simulator's tests drive engines with it, and bench:ttft replays whole workloads on it in model
 * time (fireNext).
 */
export class ManualClock implements Clock {
  private time = 0;
  private nextId = 1;
  private readonly timers = new Map<number, { at: number; callback: () => void }>();
  /** Timers fired so far. */
  fired = 0;

  now(): number {
    return this.time;
  }

  setTimer(callback: () => void, delayMs: number): unknown {
    const id = this.nextId++;
    this.timers.set(id, { at: this.time + Math.max(0, delayMs), callback });
    return id;
  }

  clearTimer(handle: unknown): void {
    this.timers.delete(handle as number);
  }

  get pendingTimers(): number {
    return this.timers.size;
  }

  /** Move time forward by `ms`, firing each due timer at its own deadline. */
  advance(ms: number): void {
    const target = this.time + ms;
    for (;;) {
      const next = this.earliest();
      if (next === undefined || next[1].at > target) break;
      this.timers.delete(next[0]);
      this.time = next[1].at;
      this.fired++;
      next[1].callback();
    }
    this.time = target;
  }

  /** Jump to `ms` later first, then fire what is due: every timer fires late. */
  advanceLate(ms: number): void {
    this.time += ms;
    for (;;) {
      const next = this.earliest();
      if (next === undefined || next[1].at > this.time) break;
      this.timers.delete(next[0]);
      this.fired++;
      next[1].callback();
    }
  }

  /**
   * Fires the earliest timer alone, moving time to its deadline (others due at the same instant
   * wait for the next call, so the caller can run promise continuations in between); false when
   * none is left.
   */
  fireNext(): boolean {
    const next = this.earliest();
    if (next === undefined) return false;
    this.timers.delete(next[0]);
    this.time = next[1].at;
    this.fired++;
    next[1].callback();
    return true;
  }

  /** Fire timers until none is left (at most `limit`, against runaway loops). */
  runAll(limit = 1_000_000): void {
    for (let i = 0; i < limit; i++) {
      const next = this.earliest();
      if (next === undefined) return;
      this.advance(next[1].at - this.time);
    }
    throw new Error("ManualClock.runAll: timer limit reached");
  }

  private earliest(): [number, { at: number; callback: () => void }] | undefined {
    let best: [number, { at: number; callback: () => void }] | undefined;
    for (const entry of this.timers)
      if (best === undefined || entry[1].at < best[1].at) best = entry;
    return best;
  }
}
