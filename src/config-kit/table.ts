/**
 * The whole settings table, as features' sections keyed by feature: the nested configuration's
 * defaults, its parse from raw flag values, and its flag-keyed view (values in the flags' units)
 * for --help, the docs and tests.
 */
import { ConfigError } from "../errors.js";
import type { Row, Section } from "./setting.js";

/** A section per feature: `{ proxy: Section<ProxyConfig>, ... }` for a Config `{ proxy: ProxyConfig, ... }`. */
export type Sections<C> = { readonly [S in keyof C]: Section<C[S]> };

/** A row placed in the table, with the feature it belongs to. */
export interface PlacedRow extends Row {
  readonly section: string;
}

/** Raw values from flags or the environment, keyed by Row.key. */
export type RawValues = Readonly<Record<string, string | string[] | undefined>>;

/** Values in the flags' own units (seconds for a `-secs` flag), keyed by Row.key. */
export type FlagValues = Readonly<Record<string, unknown>>;

export function placedRows<C>(sections: Sections<C>): PlacedRow[] {
  const rows: PlacedRow[] = [];
  const keys = new Set<string>();
  for (const [name, s] of Object.entries(sections as Record<string, Section<unknown>>)) {
    for (const row of s.rows) {
      if (keys.has(row.key)) throw new Error(`two settings are named ${row.key}`);
      keys.add(row.key);
      rows.push({ ...row, section: name });
    }
  }
  return rows;
}

const copy = (value: unknown): unknown => (Array.isArray(value) ? [...value] : value);

/** Every feature's options with their defaults. */
export function defaultsOf<C>(sections: Sections<C>): C {
  const config: Record<string, Record<string, unknown>> = {};
  for (const [name, s] of Object.entries(sections as Record<string, Section<unknown>>)) {
    const values: Record<string, unknown> = {};
    for (const row of s.rows) values[row.field] = copy(row.default);
    config[name] = values;
  }
  return config as C;
}

/** Runs every section's check that involves several of its settings. */
export function checkAll<C>(sections: Sections<C>, config: C): C {
  for (const [name, s] of Object.entries(sections as Record<string, Section<unknown>>)) {
    s.check?.((config as Record<string, unknown>)[name]);
  }
  return config;
}

/**
 * Parses raw values (flags or environment, several values joined by a space) over the defaults.
 * Throws ConfigError naming the flag on the first invalid value (combinations: checkAll).
 */
export function parseRaw<C>(sections: Sections<C>, raw: RawValues): C {
  const config = defaultsOf(sections) as Record<string, Record<string, unknown>>;
  for (const row of placedRows(sections)) {
    const value = raw[row.key];
    if (value === undefined) continue;
    const joined = Array.isArray(value) ? value.join(" ") : value;
    config[row.section]![row.field] = row.parse(joined, row.flag);
  }
  return config as C;
}

/** A value in the flag's unit (the default as --help shows it, a test's override). */
export function toFlagUnit(row: Row, value: unknown): unknown {
  const per = row.parse.perFlagUnit;
  return per !== undefined && typeof value === "number" ? value / per : value;
}

function fromFlagUnit(row: Row, value: unknown): unknown {
  const per = row.parse.perFlagUnit;
  return per !== undefined && typeof value === "number"
    ? Math.round(value * per * 1000) / 1000
    : value;
}

/** The configuration flag-keyed, in the flags' units (`{ requestTimeoutSecs: 1800, ... }`). */
export function flagValuesOf<C>(sections: Sections<C>, config: C): Record<string, unknown> {
  const nested = config as Record<string, Record<string, unknown>>;
  const flat: Record<string, unknown> = {};
  for (const row of placedRows(sections)) {
    flat[row.key] = toFlagUnit(row, nested[row.section]?.[row.field]);
  }
  return flat;
}

/**
 * `config` with flag-keyed values in the flags' units set (`{ requestTimeoutSecs: 2 }` sets the
 * proxy's requestTimeoutMs to 2000); not parsed or checked again. An unknown name throws.
 */
export function withFlagValues<C>(sections: Sections<C>, config: C, values: FlagValues): C {
  const byKey = new Map(placedRows(sections).map((r) => [r.key, r]));
  const nested = config as Record<string, Record<string, unknown>>;
  const out: Record<string, Record<string, unknown>> = {};
  for (const [name, values] of Object.entries(nested)) out[name] = { ...values };
  for (const [name, value] of Object.entries(values)) {
    const row = byKey.get(name);
    if (row === undefined) throw new ConfigError(name, "is not a setting");
    out[row.section]![row.field] = fromFlagUnit(row, value);
  }
  return out as C;
}

/** The rows as the command line shows them: each default in its flag's unit (seconds, not ms). */
export function flagRows<C>(sections: Sections<C>): PlacedRow[] {
  return placedRows(sections).map((row) => ({ ...row, default: toFlagUnit(row, row.default) }));
}
