/**
 * A comma-separated list from a flag: positive integers, or names each one of `defaults`; the
 * defaults when the flag is absent. Anything else ends the benchmark with a usage line (exit 2).
 */
export function listFlag<T extends string | number>(
  /** The benchmark's name, for the error line. */
  bench: string,
  value: string | undefined,
  defaults: readonly T[],
  parse: (item: string) => T,
  flag: string,
): T[] {
  if (value === undefined) return [...defaults];
  const items = value.split(",").map((item) => parse(item.trim()));
  for (const item of items) {
    if (typeof item === "number" ? !Number.isInteger(item) || item < 1 : !defaults.includes(item)) {
      const expected =
        typeof item === "number" ? "positive integers" : `names among ${defaults.join(", ")}`;
      console.error(`${bench}: --${flag} ${value}: expected a comma-separated list of ${expected}`);
      process.exit(2);
    }
  }
  return items;
}
