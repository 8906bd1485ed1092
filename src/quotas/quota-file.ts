import { extname } from "node:path";
import { isMap, isScalar, LineCounter, parseDocument } from "yaml";
import { DEFAULT_TENANT, isTenantName } from "../admission/identity.js";
import { checkNesting } from "../watched-file/nesting.js";

/** This module, for a parse process to load parseQuotaFile from. */
export const QUOTA_FILE_MODULE = import.meta.url;

/** One tenant's limits; an absent limit is no limit. */
export interface QuotaLimits {
  readonly tokensPerMinute?: number;
  readonly concurrentRequests?: number;
}

/** A parsed --tenant-quota file. */
export interface QuotaTable {
  /** The tenants listed, by name. */
  readonly tenants: ReadonlyMap<string, QuotaLimits>;
  /** The limits of every tenant not listed (each on its own counters); undefined = none. */
  readonly others: QuotaLimits | undefined;
}

/** Bounds on a quota file: bytes read, tenants listed, one limit. */
export const MAX_QUOTA_FILE_BYTES = 1024 * 1024;
export const MAX_QUOTA_TENANTS = 10_000;
const MAX_LIMIT = 1e12;
const LIMIT_FIELDS = {
  tokens_per_minute: "tokensPerMinute",
  concurrent_requests: "concurrentRequests",
} as const;
const TOP_FIELDS = ["tenants", "others"];

/** What the file is wrong about, and where (1-based line, dotted key). */
export class QuotaFileError extends Error {
  constructor(
    readonly reason: string,
    readonly line?: number,
    readonly key?: string,
  ) {
    const where = [line !== undefined ? `line ${line}` : "", key !== undefined ? `(${key})` : ""]
      .filter((s) => s !== "")
      .join(" ");
    super(where === "" ? reason : `${where}: ${reason}`);
    this.name = "QuotaFileError";
  }
}

/**
 * --tenant-quota: JSON or YAML (JSON is read as YAML, which it is a subset of, so errors name a
 * line too):
 *
 *   tenants:
 *     batch: { tokens_per_minute: 200000, concurrent_requests: 64 }
 *   others: { tokens_per_minute: 20000 }
 *
 * Throws a QuotaFileError naming the line and key of the first mistake.
 */
export function parseQuotaFile(text: string, path = ""): QuotaTable {
  checkNesting(text);
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, uniqueKeys: true, prettyErrors: false });
  const kind = extname(path).toLowerCase() === ".json" ? "JSON" : "YAML";
  const first = doc.errors[0];
  if (first !== undefined) {
    const line = lines.linePos(first.pos[0]).line;
    throw new QuotaFileError(`not valid ${kind}: ${first.message.split("\n")[0]}`, line);
  }
  const lineOf = (node: unknown): number | undefined => {
    const range = (node as { range?: [number, number, number] } | null)?.range;
    return range === undefined ? undefined : lines.linePos(range[0]).line;
  };
  const root = doc.contents;
  if (root === null) return { tenants: new Map(), others: undefined };
  if (!isMap(root)) {
    throw new QuotaFileError(
      "must be an object with `tenants` (and optionally `others`)",
      lineOf(root),
    );
  }
  let tenants = new Map<string, QuotaLimits>();
  let others: QuotaLimits | undefined;
  for (const pair of root.items) {
    const key = isScalar(pair.key) ? String(pair.key.value) : undefined;
    if (key === undefined || !TOP_FIELDS.includes(key)) {
      throw new QuotaFileError(
        `unknown key (expected ${TOP_FIELDS.join(" or ")})`,
        lineOf(pair.key),
        key,
      );
    }
    if (key === "others") others = limitsOf(pair.value, "others", lineOf);
    else tenants = tenantsOf(pair.value, lineOf, lineOf(pair.key));
  }
  return { tenants, others };
}

function tenantsOf(
  node: unknown,
  lineOf: (node: unknown) => number | undefined,
  keyLine: number | undefined,
): Map<string, QuotaLimits> {
  const tenants = new Map<string, QuotaLimits>();
  if (node === null || (isScalar(node) && node.value === null)) return tenants;
  if (!isMap(node)) {
    throw new QuotaFileError("must map tenant names to limits", lineOf(node) ?? keyLine, "tenants");
  }
  if (node.items.length > MAX_QUOTA_TENANTS) {
    throw new QuotaFileError(
      `lists ${node.items.length} tenants, more than ${MAX_QUOTA_TENANTS}`,
      lineOf(node),
      "tenants",
    );
  }
  for (const pair of node.items) {
    const name = isScalar(pair.key) ? String(pair.key.value) : "";
    if (!isTenantName(name)) {
      throw new QuotaFileError(
        `"${name}" is not a tenant name (at most 64 of A-Z a-z 0-9 . _ : @ / -, the first alphanumeric; "${DEFAULT_TENANT}" is the tenant of requests without one)`,
        lineOf(pair.key),
        `tenants.${name}`,
      );
    }
    tenants.set(name, limitsOf(pair.value, `tenants.${name}`, lineOf));
  }
  return tenants;
}

function limitsOf(
  node: unknown,
  key: string,
  lineOf: (node: unknown) => number | undefined,
): QuotaLimits {
  // A tenant listed with no limits (`chat: {}` or `chat:`) has none, whatever `others` says.
  if (node === null || (isScalar(node) && node.value === null)) return {};
  if (!isMap(node)) {
    throw new QuotaFileError(
      "must be an object with tokens_per_minute and/or concurrent_requests",
      lineOf(node),
      key,
    );
  }
  const limits: { tokensPerMinute?: number; concurrentRequests?: number } = {};
  for (const pair of node.items) {
    const field = isScalar(pair.key) ? String(pair.key.value) : "";
    const name = LIMIT_FIELDS[field as keyof typeof LIMIT_FIELDS];
    if (name === undefined) {
      throw new QuotaFileError(
        "unknown field (expected tokens_per_minute or concurrent_requests)",
        lineOf(pair.key),
        `${key}.${field}`,
      );
    }
    const value = isScalar(pair.value) ? pair.value.value : undefined;
    if (typeof value !== "number" || !Number.isInteger(value) || value < 1 || value > MAX_LIMIT) {
      throw new QuotaFileError(
        `must be a whole number from 1 to ${MAX_LIMIT}, got ${JSON.stringify(value ?? null)}`,
        lineOf(pair.value) ?? lineOf(pair.key),
        `${key}.${field}`,
      );
    }
    limits[name] = value;
  }
  return limits;
}

/** The limits of `tenant`: its own row, else `others`, else none (undefined). */
export function limitsFor(table: QuotaTable, tenant: string): QuotaLimits | undefined {
  const own = table.tenants.get(tenant);
  if (own !== undefined) return own;
  return table.others;
}
