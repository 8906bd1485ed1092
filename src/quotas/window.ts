/**
 * Tokens per minute as a sliding window, estimated from two fixed ones (the current minute and the
 * one before): the previous minute counts in proportion to the part of it still inside the last 60
 * seconds. One counter per minute is all that is stored (locally or in Redis), and a burst at a
 * minute's edge cannot pass twice the limit as it could with fixed windows.
 */
export const WINDOW_MS = 60_000;

/** The index of the fixed window that `now` (epoch ms) falls in. */
export function windowIndex(now: number, windowMs = WINDOW_MS): number {
  return Math.floor(now / windowMs);
}

/** Tokens counted in the last window at `now`: the previous window, weighted, plus the current one. */
export function slidingUsage(prev: number, cur: number, now: number, windowMs = WINDOW_MS): number {
  const elapsed = now - windowIndex(now, windowMs) * windowMs;
  return (prev * (windowMs - elapsed)) / windowMs + cur;
}

/**
 * Whether `cost` more tokens fit under `limit` at `now`. A request larger than the whole limit is
 * counted as the limit: it passes once the window is empty, instead of never.
 */
export function fits(
  prev: number,
  cur: number,
  cost: number,
  limit: number,
  now: number,
  windowMs = WINDOW_MS,
): boolean {
  return slidingUsage(prev, cur, now, windowMs) + Math.min(cost, limit) <= limit;
}

/**
 * How long until `cost` fits, assuming nothing more is charged meanwhile (ms, 0 when it fits now):
 * within the current window only the previous one's weight falls; after it, the current one's
 * count becomes the previous and falls in turn.
 */
export function msUntilFits(
  prev: number,
  cur: number,
  cost: number,
  limit: number,
  now: number,
  windowMs = WINDOW_MS,
): number {
  if (fits(prev, cur, cost, limit, now, windowMs)) return 0;
  const start = windowIndex(now, windowMs) * windowMs;
  const room = limit - Math.min(cost, limit);
  if (cur <= room && prev > 0) {
    // Inside this window: prev * (1 - f) + cur <= room.
    const f = 1 - (room - cur) / prev;
    return Math.max(0, Math.ceil(start + f * windowMs - now));
  }
  // The next window: cur * (1 - f) <= room.
  const f = cur > 0 ? 1 - room / cur : 0;
  return Math.ceil(start + windowMs + Math.max(0, f) * windowMs - now);
}
