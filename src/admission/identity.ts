import { createHash } from "node:crypto";
import type { IncomingHttpHeaders } from "node:http";

/** Who a request belongs to and how much it matters, as admission sees it. */
export interface RequestIdentity {
  /** A tracked tenant name, or DEFAULT_TENANT: never an unbounded value. */
  readonly tenant: string;
  /** An integer in [MIN_PRIORITY, MAX_PRIORITY]; higher goes first. */
  readonly priority: number;
}

export const DEFAULT_TENANT = "default";
export const MIN_PRIORITY = -100;
export const MAX_PRIORITY = 100;
/** Longer tenant names are not a tenant (they count as default). */
export const MAX_TENANT_CHARS = 64;
/** Tenant names are label-safe: no quotes, spaces or control characters. */
const TENANT_NAME = /^[A-Za-z0-9][A-Za-z0-9._:@/-]*$/;
/** A tracked tenant not seen for this long may give its place to a new one. */
const IDLE_MS = 60_000;

export interface IdentityOptions {
  /** --tenant-header */
  tenantHeader: string;
  /** --priority-header */
  priorityHeader: string;
}

/**
 * The tenants tracked at once (--max-tenants), so that neither the queue's shares nor the metric
 * labels grow with whatever names clients send. A new name takes a free place, or the place of
 * the tenant seen least recently if it has been idle for a minute; otherwise it counts as default.
 */
export class TenantTable {
  /** Name → last seen (epoch ms), in order of last sight (a Map keeps insertion order). */
  private readonly seen = new Map<string, number>();
  private readonly forgetListeners: Array<(tenant: string) => void> = [];
  /** Names always tracked, outside the --max-tenants places (the tenants a quota file lists). */
  private pinned: ReadonlySet<string> = new Set();

  constructor(
    private readonly max: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** The tracked name for `name`, or DEFAULT_TENANT when there is no place for it. */
  admit(name: string): string {
    if (name === DEFAULT_TENANT || this.pinned.has(name)) return name;
    const at = this.now();
    if (this.seen.has(name)) {
      this.seen.delete(name);
      this.seen.set(name, at);
      return name;
    }
    if (this.seen.size >= this.max) {
      const [oldest, lastSeen] = this.seen.entries().next().value as [string, number];
      if (at - lastSeen < IDLE_MS) return DEFAULT_TENANT;
      this.seen.delete(oldest);
      for (const listener of this.forgetListeners) listener(oldest);
    }
    this.seen.set(name, at);
    return name;
  }

  /**
   * Tracks these names always (a quota file's tenants keep their own quota however many others
   * come); a name no longer pinned and not otherwise tracked is forgotten.
   */
  pin(names: ReadonlySet<string>): void {
    const before = this.pinned;
    this.pinned = names;
    for (const name of before) {
      if (names.has(name) || this.seen.has(name)) continue;
      for (const listener of this.forgetListeners) listener(name);
    }
  }

  /** Told of every tenant forgotten (its metric series go with it). */
  onForget(listener: (tenant: string) => void): void {
    this.forgetListeners.push(listener);
  }

  get size(): number {
    return this.seen.size;
  }
}

/**
 * A request's tenant and priority. The tenant is the --tenant-header value, else the id of the
 * bearer key it carries (a hash: never the key itself), else default; a value that is empty, too
 * long, not label-safe or beyond the table's places counts as default. The priority is the
 * --priority-header integer within bounds, else 0.
 */
export function identify(
  headers: IncomingHttpHeaders,
  options: IdentityOptions,
  tenants: TenantTable,
): RequestIdentity {
  return {
    tenant: tenants.admit(tenantName(headers, options.tenantHeader)),
    priority: priorityOf(headers[options.priorityHeader]),
  };
}

/** The request's tenant name as identify() reads it, before the tenant table's cap. */
export function tenantName(headers: IncomingHttpHeaders, header: string): string {
  const value = headers[header];
  if (typeof value === "string" && value !== "") return validTenant(value.trim());
  const key = bearerKey(headers.authorization);
  return key === undefined ? DEFAULT_TENANT : keyTenant(key);
}

function validTenant(name: string): string {
  return isTenantName(name) ? name : DEFAULT_TENANT;
}

/** Whether `name` can be a tenant: label-safe and at most MAX_TENANT_CHARS. */
export function isTenantName(name: string): boolean {
  return name.length <= MAX_TENANT_CHARS && TENANT_NAME.test(name);
}

function bearerKey(authorization: string | undefined): string | undefined {
  if (authorization === undefined) return undefined;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
  return match?.[1];
}

/** A stable id of an API key: 12 hex digits of its SHA-256, so the key never reaches a label or log. */
export function keyTenant(key: string): string {
  return `key-${createHash("sha256").update(key).digest("hex").slice(0, 12)}`;
}

/** An integer in [MIN_PRIORITY, MAX_PRIORITY]; anything else (absent, "high", 1.5, 1e9) is 0. */
export function priorityOf(value: string | string[] | undefined): number {
  if (typeof value !== "string" || !/^\s*[+-]?\d{1,3}\s*$/.test(value)) return 0;
  const priority = Number(value);
  return priority >= MIN_PRIORITY && priority <= MAX_PRIORITY ? priority : 0;
}
