import type { QuotaLimits } from "./quota-file.js";
import type { QuotaLease, QuotaStore, QuotaUsage, QuotaVerdict } from "./quota-store.js";
import { fits, msUntilFits, windowIndex } from "./window.js";

/** A refused concurrency has no known end: a second is a fair first wait. */
export const CONCURRENCY_RETRY_MS = 1000;

class Counters {
  window = 0;
  prev = 0;
  cur = 0;
  running = 0;
  /** Forgotten by the tenant table while requests were under way: goes when the last ends. */
  forgotten = false;

  /** Moves the minutes on to `now`'s. */
  roll(now: number): void {
    const index = windowIndex(now);
    if (index === this.window) return;
    this.prev = index === this.window + 1 ? this.cur : 0;
    this.cur = 0;
    this.window = index;
  }
}

/**
 * The counters of this process: quotas without --state-url, and the fallback of the Redis store
 * while Redis cannot be reached. One entry per tenant the tenant table tracks (bounded).
 */
export class LocalQuotaStore implements QuotaStore {
  private readonly tenants = new Map<string, Counters>();

  constructor(private readonly now: () => number = Date.now) {}

  acquire(tenant: string, limits: QuotaLimits, cost: number, leaseId: string): QuotaVerdict {
    const now = this.now();
    let counters = this.tenants.get(tenant);
    if (counters === undefined || counters.forgotten) {
      counters ??= new Counters();
      counters.forgotten = false;
      this.tenants.set(tenant, counters);
    }
    counters.roll(now);
    const { prev, cur, running } = counters;
    const usage = { prev, cur, at: now, running };
    const conc = limits.concurrentRequests;
    if (conc !== undefined && running >= conc) {
      return {
        admitted: false,
        reason: "quota_concurrency",
        retryAfterMs: CONCURRENCY_RETRY_MS,
        usage,
      };
    }
    const tpm = limits.tokensPerMinute;
    if (tpm !== undefined && !fits(prev, cur, cost, tpm, now)) {
      const retryAfterMs = msUntilFits(prev, cur, cost, tpm, now);
      return { admitted: false, reason: "quota_tokens", retryAfterMs, usage };
    }
    counters.cur += cost;
    counters.running += 1;
    const lease = { tenant, id: leaseId, window: counters.window, counted: true };
    return {
      admitted: true,
      lease,
      usage: { ...usage, cur: counters.cur, running: counters.running },
    };
  }

  release(lease: QuotaLease, refund: number, extra: number): void {
    const counters = this.tenants.get(lease.tenant);
    if (counters === undefined) return;
    counters.roll(this.now());
    if (lease.counted) counters.running = Math.max(0, counters.running - 1);
    if (refund > 0) {
      if (lease.window === counters.window) counters.cur = Math.max(0, counters.cur - refund);
      else if (lease.window === counters.window - 1)
        counters.prev = Math.max(0, counters.prev - refund);
    }
    counters.cur += extra;
    if (counters.forgotten && counters.running === 0) this.tenants.delete(lease.tenant);
  }

  /** Every tenant's counters now (the usage metrics). */
  *usage(): Iterable<[string, QuotaUsage]> {
    const now = this.now();
    for (const [tenant, counters] of this.tenants) {
      counters.roll(now);
      yield [
        tenant,
        { prev: counters.prev, cur: counters.cur, at: now, running: counters.running },
      ];
    }
  }

  /**
   * A tenant the tenant table forgot (idle for a minute): its counters go once nothing of it is
   * under way, so the map stays bounded by the table.
   */
  forget(tenant: string): void {
    const counters = this.tenants.get(tenant);
    if (counters === undefined) return;
    if (counters.running > 0) counters.forgotten = true;
    else this.tenants.delete(tenant);
  }
}
