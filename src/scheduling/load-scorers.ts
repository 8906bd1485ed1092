import { invertMinMax, type SchedulingContext, type Scorer } from "./plugin.js";
import { queuedPrefillRequests } from "./policy.js";

/**
 * Queue depth, min-max normalised (GIE queue-scorer, pkg/epp/scheduling/plugins/scorer/queue.go:
 * (max − q) / (max − min), every candidate 1.0 when the queues are equal). The depth is what the
 * engine reported waiting that this router did not send (Worker.foreignQueuedAt, while fresh)
 * plus this router's own in-flight requests still waiting for their first token there: the
 * engine's report is seconds old, the router's own count is exact and current.
 */
export class QueueScorer implements Scorer {
  readonly type = "queue-scorer";
  readonly usesPrefixes = false;
  constructor(readonly name: string) {}

  score(ctx: SchedulingContext, out: Float64Array): void {
    const { candidates, now } = ctx;
    for (let i = 0; i < candidates.length; i++) {
      const w = candidates[i]!;
      out[i] = Math.max(0, w.foreignQueuedAt?.(now) ?? 0) + queuedPrefillRequests(w);
    }
    invertMinMax(ctx, out);
  }
}

/**
 * 1 − KV-cache usage as the engine last reported it (GIE kv-cache-utilization-scorer:
 * `1 − KVCacheUsagePercent`). A worker without a fresh report scores as empty (1).
 */
export class KvCacheUtilizationScorer implements Scorer {
  readonly type = "kv-cache-utilization-scorer";
  readonly usesPrefixes = false;
  constructor(readonly name: string) {}

  score(ctx: SchedulingContext, out: Float64Array): void {
    const { candidates, now } = ctx;
    for (let i = 0; i < candidates.length; i++) {
      const usage = candidates[i]!.signals?.load(now)?.kvUsage;
      out[i] = usage === undefined ? 1 : 1 - Math.min(1, Math.max(0, usage));
    }
  }
}

/**
 * Requests in flight (this router's and its peers'), min-max normalised like the queue (GIE
 * running-requests-size-scorer; llm-d active-request-scorer counts the router's own requests).
 */
export class ActiveRequestScorer implements Scorer {
  readonly type = "active-request-scorer";
  readonly usesPrefixes = false;
  constructor(readonly name: string) {}

  score(ctx: SchedulingContext, out: Float64Array): void {
    const { candidates } = ctx;
    for (let i = 0; i < candidates.length; i++) out[i] = candidates[i]!.inFlight;
    invertMinMax(ctx, out);
  }
}
