/**
 * The character budget of a prefix tree, shared by the per-worker tree (radix-tree.ts) and the
 * shared index's per-worker claims (index/shared-index.ts): defaults, validation with errors that
 * name the option, and the high-water mark past which an insert evicts at once.
 */

export const DEFAULT_MAX_CHARS = 67_108_864;
export const DEFAULT_HIGH_WATER_RATIO = 1.1;

/** `value`, or a RangeError `<owner> <option> must be a positive integer, got <value>`. */
export function checkPositiveInteger(owner: string, option: string, value: unknown): number {
  if (!Number.isSafeInteger(value) || (value as number) <= 0) {
    throw new RangeError(`${owner} ${option} must be a positive integer, got ${String(value)}`);
  }
  return value as number;
}

/** `value`, or a RangeError `<owner> highWaterRatio must be a finite number >= 1, got <value>`. */
export function checkHighWaterRatio(owner: string, value: unknown): number {
  if (typeof value !== "number" || !Number.isFinite(value) || value < 1) {
    throw new RangeError(
      `${owner} highWaterRatio must be a finite number >= 1, got ${String(value)}`,
    );
  }
  return value;
}

/** Characters above which an insert evicts at once. */
export function highWaterMark(budget: number, ratio: number): number {
  return Math.floor(budget * ratio);
}

/**
 * What a budget keeps beside its running requests' reserve (PrefixIndex.reserve): at least half of
 * it, since the in-flight count the reserve is made of includes requests still waiting in the
 * engine's queue, which hold no KV yet.
 */
export function keptOf(budget: number, reserve: number): number {
  return Math.max(Math.ceil(budget / 2), budget - Math.max(0, Math.floor(reserve)));
}
