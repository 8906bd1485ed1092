/**
 * The parsers of the settings rows: each takes the raw string of a flag or its environment
 * variable and returns the value in the unit the feature uses, or throws a ConfigError naming the
 * flag. Durations given in seconds become milliseconds here, once, so no component converts.
 */
import { ConfigError } from "../errors.js";

/**
 * Raw string → value. `perFlagUnit` is set when the value's unit differs from the flag's: a flag
 * in seconds parsed to milliseconds has 1000 (help and docs show defaults in the flag's unit).
 */
export type Parser<T> = ((raw: string, flag: string) => T) & { readonly perFlagUnit?: number };

export interface NumberBounds {
  integer?: boolean;
  minExclusive?: boolean;
}

/** A number in [min, max] (or (min, max] with minExclusive), an integer when asked. */
export const number =
  (min: number, max = Number.POSITIVE_INFINITY, opts: NumberBounds = {}): Parser<number> =>
  (raw, flag) => {
    const value = Number(raw.trim());
    const kind = opts.integer ? "an integer" : "a number";
    const lower = opts.minExclusive ? `> ${min}` : `>= ${min}`;
    const range = max === Number.POSITIVE_INFINITY ? lower : `in [${min}, ${max}]`;
    const bad =
      raw.trim() === "" ||
      !Number.isFinite(value) ||
      (opts.integer && !Number.isInteger(value)) ||
      value < min ||
      (opts.minExclusive && value === min) ||
      value > max;
    if (bad) throw new ConfigError(flag, `must be ${kind} ${range}, got "${raw}"`);
    return value;
  };

/** Milliseconds in a second: defaults of durations read `30 * SEC`. */
export const SEC = 1000;

export const integer = (min: number, max = Number.MAX_SAFE_INTEGER): Parser<number> =>
  number(min, max, { integer: true });

/**
 * A duration given in seconds (bounds in seconds, as the flag reads), returned in milliseconds:
 * the one place a duration's unit changes.
 */
export function seconds(
  min: number,
  max = Number.POSITIVE_INFINITY,
  opts: NumberBounds = {},
): Parser<number> {
  const inSeconds = number(min, max, opts);
  return Object.assign((raw: string, flag: string) => secondsToMs(inSeconds(raw, flag)), {
    perFlagUnit: 1000,
  });
}

/** Seconds → milliseconds, rounded to the microsecond so 0.1 s is 100 ms, not 100.00000000000001. */
export function secondsToMs(secs: number): number {
  return Math.round(secs * 1_000_000) / 1000;
}

export const port: Parser<number> = integer(0, 65535);

export const text: Parser<string> = (raw) => raw;

/** `--worker-urls` → `RADIXGATE_WORKER_URLS`. */
export function envName(flag: string): string {
  return `RADIXGATE_${flag.replace(/^--/, "").replace(/-/g, "_").toUpperCase()}`;
}

/** A key: unset means none, but an empty value is refused (it would silently turn auth off). */
export const key: Parser<string | undefined> = (raw, flag) => {
  if (raw.trim() === "")
    throw new ConfigError(
      flag,
      `(or ${envName(flag)}) is empty; unset it to run without a key, or give a key`,
    );
  return raw;
};

export const oneOf =
  <T extends string>(values: readonly T[]): Parser<T> =>
  (raw, flag) => {
    if ((values as readonly string[]).includes(raw)) return raw as T;
    throw new ConfigError(flag, `must be one of ${values.join(", ")}, got "${raw}"`);
  };

/** A boolean flag: `--flag` alone (commander passes true), or true/false/1/0/yes/no. */
export const flagValue: Parser<boolean> = (raw, flag) => {
  const value = String(raw).trim().toLowerCase();
  if (["true", "1", "yes", "on"].includes(value)) return true;
  if (["false", "0", "no", "off", ""].includes(value)) return false;
  throw new ConfigError(flag, `must be true or false, got "${raw}"`);
};

/** An HTTP header name (RFC 9110 token), lower case. */
export const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9a-z-]+$/;

/** One or more HTTP header names, space- or comma-separated, lowercased. */
export const headerNames: Parser<string[]> = (raw, flag) => {
  const names = raw
    .split(/[\s,]+/)
    .filter((n) => n !== "")
    .map((n) => n.toLowerCase());
  for (const n of names) {
    if (!HEADER_NAME.test(n)) throw new ConfigError(flag, `has an invalid header name "${n}"`);
  }
  if (names.length === 0) throw new ConfigError(flag, "needs at least one header name");
  return names;
};

/** Exactly one header name. */
export const headerName: Parser<string> = (raw, flag) => {
  const [name] = headerNames(raw, flag);
  return name!;
};

export const urlPath: Parser<string> = (raw, flag) => {
  if (!raw.startsWith("/") || /[\s?#]/.test(raw))
    throw new ConfigError(flag, `must be a path starting with "/", got "${raw}"`);
  return raw;
};

export const optionalPort: Parser<number | undefined> = (raw, flag) =>
  raw === "" ? undefined : port(raw, flag);

/** `auto` (any case) or what `parse` accepts. */
export const autoOr =
  <T>(parse: Parser<T>): Parser<T | "auto"> =>
  (raw, flag) =>
    raw.trim().toLowerCase() === "auto" ? "auto" : parse(raw, flag);
