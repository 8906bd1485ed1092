/**
 * A feature's settings: one row per flag (flag, placeholder, description, default, parser), keyed
 * by the field of the feature's options it fills. A feature folder declares its rows with
 * `section<Options>({...})`; the rows are the single source of its defaults, its flags, their
 * environment variables, `--help` and docs/configuration.md.
 */
import type { Parser } from "./parsers.js";

/** One setting of a feature, before it is placed in the table. */
export interface RowSpec<T> {
  flag: string;
  /** Value placeholder shown in --help; `<name...>` takes several values (`--worker-urls a b c`). */
  arg: string;
  description: string;
  /** In the feature's unit (a duration in ms even when the flag is in seconds). */
  default: T;
  parse: Parser<T>;
  /** Never print the value (help, logs, docs). */
  secret?: boolean;
  /**
   * What --help and the docs show as the default when `default` is undefined but means a value
   * (a mode resolved later, so that only a value given is checked against other settings).
   */
  shownDefault?: string;
  /**
   * The setting's name in flag-keyed records (raw values, test overrides): by default the flag
   * in camelCase (`--worker-urls` → `workerUrls`).
   */
  name?: string;
}

/** A placed row: the field it fills and its flag-keyed name. */
export interface Row<T = unknown> extends RowSpec<T> {
  /** The field of the feature's options. */
  readonly field: string;
  /** The flag-keyed name (RowSpec.name, or the flag in camelCase). */
  readonly key: string;
}

/** A feature's rows, and the checks that involve several of them. */
export interface Section<T> {
  readonly rows: readonly Row[];
  /** Throws a ConfigError naming a flag when the values do not fit together. */
  readonly check: ((values: T) => void) | undefined;
  /** Only for typing: the options the rows produce. */
  readonly _values?: T;
}

/** Every field of T gets exactly one row (the compiler refuses a missing or unknown one). */
export type RowSpecs<T> = { [K in keyof T]-?: RowSpec<T[K]> };

/** `--worker-urls` → `workerUrls`. */
export function camelName(flag: string): string {
  return flag.replace(/^--/, "").replace(/-([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

/** A feature's settings table; the rows' order is the order --help and the docs show. */
export function section<T>(specs: RowSpecs<T>, check?: (values: T) => void): Section<T> {
  const rows = Object.entries(specs as Record<string, RowSpec<unknown>>).map(
    ([field, spec]): Row => ({ ...spec, field, key: spec.name ?? camelName(spec.flag) }),
  );
  return { rows, check };
}
