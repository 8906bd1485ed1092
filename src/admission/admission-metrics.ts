import { Counter, Gauge, Histogram, type Registry } from "prom-client";
import type { AdmissionQueue, QueueObserver, RefusalReason } from "./admission-queue.js";
import type { RequestIdentity } from "./identity.js";

/** Refusals by a quota step (quotas/quota-step.ts), counted here with the queue's. */
export type QuotaRefusalReason = "quota_tokens" | "quota_concurrency";

const REASONS = [
  "too_many_requests",
  "tenant_queue_full",
  "shed",
  "queue_timeout",
  "quota_tokens",
  "quota_concurrency",
] as const;

const WAIT_BUCKETS = [0.005, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/** One worker's saturation at scrape time. */
export interface SaturationGaugeSource {
  workers(): Iterable<{ id: string; reason: string | undefined }>;
}

/**
 * The admission metrics (issue 24 item 5). Labels stay bounded: priority is an integer in
 * [-100, 100], tenant one of the tenant table's --max-tenants names or default (a forgotten
 * tenant's series are removed), worker one of the registered workers.
 */
export class AdmissionMetrics implements QueueObserver {
  private readonly waitByPriority: Histogram<"priority">;
  private readonly waitByTenant: Histogram<"tenant">;
  private readonly refusals: Counter<"reason" | "priority">;
  private readonly tenantRefusals: Counter<"tenant" | "reason">;

  constructor(
    registry: Registry,
    queue: AdmissionQueue,
    saturation: SaturationGaugeSource,
    /** The router-wide rejections counter (radixgate_queue_rejections_total{reason}). */
    private readonly rejections: { inc(labels: { reason: string }): void },
  ) {
    const registers = [registry];
    this.waitByPriority = new Histogram({
      name: "radixgate_queue_wait_seconds",
      help: "Time requests waited in the admission queue before they went, by priority.",
      labelNames: ["priority"],
      buckets: WAIT_BUCKETS,
      registers,
    });
    this.waitByTenant = new Histogram({
      name: "radixgate_tenant_queue_wait_seconds",
      help: "Time requests waited in the admission queue before they went, by tenant.",
      labelNames: ["tenant"],
      buckets: WAIT_BUCKETS,
      registers,
    });
    this.refusals = new Counter({
      name: "radixgate_admission_refusals_total",
      help: "Requests admission refused (the queue: too_many_requests, tenant_queue_full, shed, queue_timeout; a tenant quota: quota_tokens, quota_concurrency), by priority.",
      labelNames: ["reason", "priority"],
      registers,
    });
    this.tenantRefusals = new Counter({
      name: "radixgate_tenant_admission_refusals_total",
      help: "Requests the admission queue refused, by tenant and reason.",
      labelNames: ["tenant", "reason"],
      registers,
    });
    new Gauge({
      name: "radixgate_queue_length",
      help: "Requests waiting in the admission queue, by priority.",
      labelNames: ["priority"],
      registers,
      collect() {
        this.reset();
        for (const [priority, size] of queue.shape.bandSizes()) {
          this.set({ priority: String(priority) }, size);
        }
      },
    });
    new Gauge({
      name: "radixgate_tenant_queue_length",
      help: "Requests waiting in the admission queue, by tenant.",
      labelNames: ["tenant"],
      registers,
      collect() {
        this.reset();
        for (const [tenant, size] of queue.shape.tenantSizes()) this.set({ tenant }, size);
      },
    });
    new Gauge({
      name: "radixgate_worker_saturated",
      help: "1 while a worker counts as saturated (engine_queue, kv_usage or pending_prefill: the reason label), else 0.",
      labelNames: ["worker", "reason"],
      registers,
      collect() {
        this.reset();
        for (const { id, reason } of saturation.workers()) {
          this.set({ worker: id, reason: reason ?? "none" }, reason === undefined ? 0 : 1);
        }
      },
    });
  }

  granted(identity: RequestIdentity, waitedMs: number): void {
    this.waitByPriority.observe({ priority: String(identity.priority) }, waitedMs / 1000);
    this.waitByTenant.observe({ tenant: identity.tenant }, waitedMs / 1000);
  }

  refused(identity: RequestIdentity, reason: RefusalReason | QuotaRefusalReason): void {
    this.rejections.inc({ reason });
    this.refusals.inc({ reason, priority: String(identity.priority) });
    this.tenantRefusals.inc({ tenant: identity.tenant, reason });
  }

  /** A tenant left the tenant table: its series go. */
  forgetTenant(tenant: string): void {
    this.waitByTenant.remove({ tenant });
    for (const reason of REASONS) {
      this.tenantRefusals.remove({ tenant, reason });
    }
  }
}
