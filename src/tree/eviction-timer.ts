/** Anything that evicts down to its own budget (a tree, an index unit). */
export interface Evictable {
  evict(): number;
}

export interface EvictionTimer {
  stop(): void;
}

/** setInterval clamps longer delays to 1 ms (with a warning), so refuse them. */
const MAX_INTERVAL_MS = 2_147_483_000;

/**
 * Every intervalMs, call tree.evict() on each tree from getTrees() (asked afresh each tick, so
 * workers added or removed meanwhile are seen). intervalMs 0 = no timer (stop is a no-op). The
 * timer is unref()'d so it never keeps the process alive.
 *
 * A sweep evicts one tree per turn of the event loop (setImmediate), so requests are never held up
 * for longer than one tree's eviction; a tick that comes while a sweep is still running is skipped.
 * An error thrown while evicting a tree (only an onEvict hook can throw) does not stop the sweep:
 * it goes to `onError` when given, else it is thrown from that tree's turn (an uncaught exception).
 */
export function startEvictionTimer(
  getTrees: () => Iterable<Evictable>,
  intervalMs: number,
  onError?: (error: unknown) => void,
): EvictionTimer {
  if (
    typeof intervalMs !== "number" ||
    !Number.isFinite(intervalMs) ||
    intervalMs < 0 ||
    intervalMs > MAX_INTERVAL_MS
  ) {
    throw new RangeError(
      `eviction interval must be a number of milliseconds in [0, ${MAX_INTERVAL_MS}], got ${String(intervalMs)}`,
    );
  }
  if (intervalMs === 0) return { stop() {} };

  let stopped = false;
  let pending: NodeJS.Immediate | null = null;

  const step = (trees: Evictable[], index: number): void => {
    pending = null;
    if (stopped || index >= trees.length) return;
    // Schedule the rest first, so that a throwing tree does not end the sweep.
    pending = setImmediate(step, trees, index + 1);
    pending.unref();
    try {
      trees[index]!.evict();
    } catch (error) {
      if (onError === undefined) throw error;
      onError(error);
    }
  };

  const handle = setInterval(() => {
    if (pending === null) step([...getTrees()], 0);
  }, intervalMs);
  handle.unref();

  return {
    stop() {
      stopped = true;
      clearInterval(handle);
      if (pending !== null) clearImmediate(pending);
      pending = null;
    },
  };
}
