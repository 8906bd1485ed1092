import type { QuotaRefusalReason } from "../admission/admission-metrics.js";
import type { QuotaLimits } from "./quota-file.js";

/** Why a quota refuses a request (the metrics' reason label, admission-metrics.ts). */
export type QuotaReason = QuotaRefusalReason;

/** One tenant's counters as a store last saw them. */
export interface QuotaUsage {
  /** Tokens of the previous and the current fixed minute (window.ts weighs them). */
  readonly prev: number;
  readonly cur: number;
  /** When they were read (epoch ms, the store's clock). */
  readonly at: number;
  /** Requests of the tenant under way (across replicas for the Redis store). */
  readonly running: number;
}

/** What a request admitted by a quota holds until it ends. */
export interface QuotaLease {
  readonly tenant: string;
  readonly id: string;
  /** The minute its estimate was charged to (refunds go there). */
  readonly window: number;
  /** Whether it holds a concurrency place. */
  readonly counted: boolean;
}

export type QuotaVerdict =
  | { readonly admitted: true; readonly lease: QuotaLease; readonly usage: QuotaUsage }
  | {
      readonly admitted: false;
      readonly reason: QuotaReason;
      readonly retryAfterMs: number;
      readonly usage: QuotaUsage;
    };

/**
 * Where the counters live: this process (local-quota-store.ts) or Redis, shared by the replicas
 * (redis-quota-store.ts). Both check and charge in one step, so two requests never both take the
 * last place.
 */
export interface QuotaStore {
  acquire(
    tenant: string,
    limits: QuotaLimits,
    cost: number,
    leaseId: string,
  ): QuotaVerdict | Promise<QuotaVerdict>;
  /**
   * The request ended: its concurrency place is given back, `refund` tokens of its estimate go
   * back to the minute they were charged to, `extra` tokens (more than estimated) are charged now.
   */
  release(lease: QuotaLease, refund: number, extra: number): void;
  /** Each tenant's counters as last seen (the usage gauges). */
  usage(): Iterable<[string, QuotaUsage]>;
  /** A tenant the tenant table forgot: what is kept of it goes (bounded memory and labels). */
  forget(tenant: string): void;
}
