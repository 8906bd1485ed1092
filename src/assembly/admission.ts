import { Admission } from "../admission/admission.js";
import { AdmissionMetrics } from "../admission/admission-metrics.js";
import { AdmissionQueue } from "../admission/admission-queue.js";
import type { IdentityOptions } from "../admission/identity.js";
import { TenantTable } from "../admission/identity.js";
import { type SaturationThresholds, saturationReason } from "../admission/saturation.js";
import type { AdmissionConfig } from "../admission/settings.js";
import type { Metrics } from "../metrics.js";
import type { WorkerRegistry } from "../workers/registry.js";

/** Admission's parts, built once: the tenant table intake shares, the queue, its metrics. */
export interface AdmissionParts {
  admission: Admission;
  tenants: TenantTable;
  identity: IdentityOptions;
}

/** The saturation thresholds from the flags (--saturation-*). */
export function saturationThresholds(config: AdmissionConfig): SaturationThresholds {
  return {
    queueDepth: config.saturationQueueDepth,
    kvUsage: config.saturationKvUsage,
    pendingPrefillChars: config.saturationPendingPrefillChars,
  };
}

export function buildAdmission(
  config: AdmissionConfig,
  deps: { registry: WorkerRegistry; metrics: Metrics },
): AdmissionParts {
  const thresholds = saturationThresholds(config);
  const tenants = new TenantTable(config.maxTenants);
  const queue = new AdmissionQueue({
    maxConcurrent: config.maxConcurrentRequests,
    queueSize: config.queueSize,
    maxQueuedPerTenant: config.maxQueuedPerTenant,
    queueWhenSaturated: config.queueWhenSaturated,
    thresholds,
  });
  const metrics = new AdmissionMetrics(
    deps.metrics.registry,
    queue,
    {
      *workers() {
        const now = Date.now();
        for (const worker of deps.registry.list()) {
          yield { id: worker.id, reason: saturationReason(worker, thresholds, now) };
        }
      },
    },
    deps.metrics.queueRejections,
  );
  queue.observeWith(metrics);
  tenants.onForget((tenant) => {
    queue.forgetTenant(tenant);
    metrics.forgetTenant(tenant);
  });
  return {
    admission: new Admission(queue, thresholds, config.queueWhenSaturated),
    tenants,
    identity: { tenantHeader: config.tenantHeader, priorityHeader: config.priorityHeader },
  };
}
