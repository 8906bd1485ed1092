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
