import { Admission } from "../admission/admission.js";
import { AdmissionMetrics } from "../admission/admission-metrics.js";
import { AdmissionQueue } from "../admission/admission-queue.js";
import type { IdentityOptions } from "../admission/identity.js";
import { TenantTable } from "../admission/identity.js";
import type { AdmissionConfig } from "../admission/settings.js";
import type { Logger } from "../logger.js";
import type { Metrics } from "../metrics.js";
import { TenantQuotas } from "../quotas/tenant-quotas.js";
import type { StateConfig } from "../state/settings.js";
import { DEFAULT_CHARS_PER_TOKEN } from "../workers/chars-per-token.js";
import type { WorkerRegistry } from "../workers/registry.js";
import { type SaturationThresholds, saturationReason } from "../workers/saturation.js";

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
  deps: {
    registry: WorkerRegistry;
    metrics: Metrics;
    logger: Logger;
    /** --state-url and --state-key-prefix: where --tenant-quota's counters are shared. */
    state: Pick<StateConfig, "url" | "keyPrefix">;
  },
): AdmissionParts {
  const thresholds = saturationThresholds(config);
  const tenants = new TenantTable(config.maxTenants);
  const queue = new AdmissionQueue({
    maxConcurrent: config.maxConcurrentRequests,
    queueSize: config.queueSize,
    maxQueuedPerTenant: config.maxQueuedPerTenant,
    queueWhenSaturated: config.queueWhenSaturated,
    thresholds,
    reserveSlots: config.tenantReserveSlots,
    holdForFreeSlot: config.holdForFreeSlot,
    reservePace: config.tenantReservePace,
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
  // A paced request goes at a worker's last first byte, as soon as it can. Requests are paced
  // at the engines only with --engine-priority or the reserve's pace; else the queue keeps its
  // own rhythm.
  const reservePaced =
    config.queueWhenSaturated && config.tenantReserveSlots > 0 && config.tenantReservePace;
  if (config.enginePriority || reservePaced) {
    const paced = () => queue.prefillIdled();
    for (const worker of deps.registry.list()) worker.onPrefillIdle = paced;
    deps.registry.onChange((event, worker) => {
      if (event === "added") worker.onPrefillIdle = paced;
    });
  }
  tenants.onForget((tenant) => {
    queue.forgetTenant(tenant);
    metrics.forgetTenant(tenant);
  });
  // --tenant-quota: a step before the queue; without it nothing runs per request.
  const stateUrl = deps.state.url;
  const quotas =
    config.tenantQuotaFile === ""
      ? undefined
      : new TenantQuotas(
          {
            file: config.tenantQuotaFile,
            ...(stateUrl !== undefined
              ? { shared: { url: stateUrl, keyPrefix: deps.state.keyPrefix } }
              : {}),
          },
          {
            registry: deps.metrics.registry,
            logger: deps.logger,
            tenants,
            charsPerToken: () => fleetCharsPerToken(deps.registry),
            refused: (identity, reason) => metrics.refused(identity, reason),
          },
        );
  return {
    admission: new Admission(
      queue,
      thresholds,
      config.queueWhenSaturated,
      quotas === undefined ? [] : [quotas.step],
      quotas === undefined ? [] : [quotas],
      config.enginePriority,
    ),
    tenants,
    identity: { tenantHeader: config.tenantHeader, priorityHeader: config.priorityHeader },
  };
}

/** The workers' learned characters per prompt token, averaged (the default before any is learned). */
function fleetCharsPerToken(registry: WorkerRegistry): number {
  const workers = registry.list();
  if (workers.length === 0) return DEFAULT_CHARS_PER_TOKEN;
  let sum = 0;
  for (const worker of workers) sum += worker.charsPerToken;
  return sum / workers.length;
}
