/**
 * A number from a flag, at least `min` (and whole when `integer`); undefined when the flag is
 * absent. Anything else is a clear error naming the flag.
 */
export function numberFlag(
  flag: string,
  raw: string | undefined,
  min: number,
  integer: boolean,
): number | undefined {
  if (raw === undefined) return undefined;
  const v = Number(raw);
  if (!Number.isFinite(v) || v < min || (integer && !Number.isInteger(v))) {
    throw new Error(`--${flag} must be ${integer ? "an integer" : "a number"} >= ${min}`);
  }
  return v;
}
