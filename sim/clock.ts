/**
 * Time as the engine sees it. The real clock in production; tests substitute a manual one to step
 * the engine deterministically.
 */

export interface Clock {
  /** Milliseconds, monotonic. */
  now(): number;
  setTimer(callback: () => void, delayMs: number): unknown;
  clearTimer(handle: unknown): void;
}

export const realClock: Clock = {
  now: () => performance.now(),
  setTimer: (callback, delayMs) => setTimeout(callback, delayMs),
  clearTimer: (handle) => clearTimeout(handle as NodeJS.Timeout),
};
