import { Counter, Gauge, type Registry } from "prom-client";
import { limitsFor, type QuotaTable } from "./quota-file.js";
import type { QuotaStore } from "./quota-store.js";
import { slidingUsage } from "./window.js";

/**
 * The quota metrics (refusals are counted with admission's, admission-metrics.ts). Tenant labels
 * are the tenant table's (bounded by --max-tenants and the file's tenants); a forgotten tenant's
 * counters leave the store, and its series with them at the next scrape.
 */
export class QuotaMetrics {
  readonly storeErrors: Counter<string>;
  readonly fileReloads: Counter<"outcome">;
  private readonly shared: Gauge<string>;

  constructor(registry: Registry, store: QuotaStore, table: () => QuotaTable, now = Date.now) {
    const registers = [registry];
    new Gauge({
      name: "radixgate_tenant_quota_usage",
      help: "A tenant's use of its quota as this replica last saw it: tokens in the last minute (sliding), requests under way (across replicas with --state-url).",
      labelNames: ["tenant", "limit"],
      registers,
      collect() {
        this.reset();
        const at = now();
        for (const [tenant, usage] of store.usage()) {
          const tokens = slidingUsage(usage.prev, usage.cur, Math.max(at, usage.at));
          this.set({ tenant, limit: "tokens_per_minute" }, Math.round(tokens));
          this.set({ tenant, limit: "concurrent_requests" }, usage.running);
        }
      },
    });
    new Gauge({
      name: "radixgate_tenant_quota_limit",
      help: "A tenant's limits from --tenant-quota (its own row, else others), for the tenants in radixgate_tenant_quota_usage.",
      labelNames: ["tenant", "limit"],
      registers,
      collect() {
        this.reset();
        const quotas = table();
        for (const [tenant] of store.usage()) {
          const limits = limitsFor(quotas, tenant);
          if (limits?.tokensPerMinute !== undefined)
            this.set({ tenant, limit: "tokens_per_minute" }, limits.tokensPerMinute);
          if (limits?.concurrentRequests !== undefined)
            this.set({ tenant, limit: "concurrent_requests" }, limits.concurrentRequests);
        }
      },
    });
    this.storeErrors = new Counter({
      name: "radixgate_quota_redis_errors_total",
      help: "Quota checks and releases Redis failed or was too slow for; the request went on, counted on this replica's own counters (fail open).",
      registers,
    });
    this.shared = new Gauge({
      name: "radixgate_quota_shared",
      help: "1 while tenant quotas are counted in Redis across replicas, 0 while on this replica's own counters (no --state-url, or Redis unreachable).",
      registers,
    });
    this.fileReloads = new Counter({
      name: "radixgate_quota_file_reloads_total",
      help: "Versions of the --tenant-quota file read after start: applied, or rejected (the last good one stands).",
      labelNames: ["outcome"],
      registers,
    });
  }

  setShared(shared: boolean): void {
    this.shared.set(shared ? 1 : 0);
  }
}
