/**
 * Reading an untrusted configuration document with errors that name the path in the file
 * (`schedulingProfiles[0].plugins[2].weight: must be ≥ 0`), so an operator can go straight to the
 * line. Every reader checks its type and range; unknown keys are refused (a misspelt parameter
 * would otherwise silently keep its default).
 */
export class SchedulerConfigError extends Error {
  constructor(
    readonly path: string,
    readonly reason: string,
  ) {
    super(path === "" ? reason : `${path}: ${reason}`);
    this.name = "SchedulerConfigError";
  }
}

export type Json = Record<string, unknown>;

export function child(path: string, key: string | number): string {
  if (typeof key === "number") return `${path}[${key}]`;
  return path === "" ? key : `${path}.${key}`;
}

export function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "a list";
  if (typeof value === "object") return "a mapping";
  return JSON.stringify(value) ?? String(value);
}

export function object(value: unknown, path: string): Json {
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new SchedulerConfigError(path, `must be a mapping, got ${describe(value)}`);
  }
  return value as Json;
}

export function list(value: unknown, path: string): unknown[] {
  if (!Array.isArray(value))
    throw new SchedulerConfigError(path, `must be a list, got ${describe(value)}`);
  return value;
}

export function text(value: unknown, path: string): string {
  if (typeof value !== "string" || value.trim() === "") {
    throw new SchedulerConfigError(path, `must be a non-empty string, got ${describe(value)}`);
  }
  return value;
}

/** Refuses keys outside `known`, naming the first one and the keys allowed. */
export function onlyKeys(obj: Json, known: readonly string[], path: string): void {
  for (const key of Object.keys(obj)) {
    if (!known.includes(key)) {
      const allowed = known.length === 0 ? "none are taken" : `expected ${known.join(", ")}`;
      throw new SchedulerConfigError(child(path, key), `unknown key (${allowed})`);
    }
  }
}

export interface NumberRule {
  readonly min?: number;
  readonly max?: number;
  /** The lower bound excluded. */
  readonly above?: number;
  readonly integer?: boolean;
}

export function number(value: unknown, path: string, rule: NumberRule): number {
  if (typeof value !== "number" || !Number.isFinite(value)) {
    throw new SchedulerConfigError(path, `must be a finite number, got ${describe(value)}`);
  }
  if (rule.integer === true && !Number.isInteger(value)) {
    throw new SchedulerConfigError(path, `must be an integer, got ${value}`);
  }
  if (rule.min !== undefined && value < rule.min) {
    throw new SchedulerConfigError(path, `must be ≥ ${rule.min}, got ${value}`);
  }
  if (rule.above !== undefined && value <= rule.above) {
    throw new SchedulerConfigError(path, `must be > ${rule.above}, got ${value}`);
  }
  if (rule.max !== undefined && value > rule.max) {
    throw new SchedulerConfigError(path, `must be ≤ ${rule.max}, got ${value}`);
  }
  return value;
}

/**
 * A plugin's `parameters`: each read names its key, default and rule; `done()` refuses the keys
 * nobody read.
 */
export class Parameters {
  private readonly read = new Set<string>();
  private readonly values: Json;

  constructor(
    value: unknown,
    readonly path: string,
  ) {
    this.values = value === undefined || value === null ? {} : object(value, path);
  }

  number(key: string, fallback: number, rule: NumberRule): number {
    this.read.add(key);
    const value = this.values[key];
    return value === undefined ? fallback : number(value, child(this.path, key), rule);
  }

  oneOf<T extends string>(key: string, fallback: T, values: readonly T[]): T {
    this.read.add(key);
    const value = this.values[key];
    if (value === undefined) return fallback;
    if (typeof value !== "string" || !(values as readonly string[]).includes(value)) {
      throw new SchedulerConfigError(
        child(this.path, key),
        `must be one of ${values.join(", ")}, got ${describe(value)}`,
      );
    }
    return value as T;
  }

  done(): void {
    onlyKeys(this.values, [...this.read], this.path);
  }
}
