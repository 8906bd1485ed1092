import type { LoadSignals } from "../workers/signals.js";

/** When one worker counts as saturated (--saturation-queue-depth, -kv-usage, -pending-prefill-chars). */
export interface SaturationThresholds {
  /** Estimated engine waiting queue, requests. */
  queueDepth: number;
  /** KV-cache usage, 0..1 (1 = never). */
  kvUsage: number;
  /** This router's uncached prompt characters there without a first byte (0 = never). */
  pendingPrefillChars: number;
}

/** Why a worker counts as saturated; the metric label and /debug/route's word. */
export type SaturationReason = "engine_queue" | "kv_usage" | "pending_prefill";

/** What saturation reads of a worker (a Worker is one). */
export interface SaturationView {
  readonly id: string;
  /** This router's requests there without a first byte yet, and their uncached characters. */
  readonly pendingPrefillRequests: number;
  readonly pendingPrefillChars: number;
  /** The engine's last reading, undefined when stale (never trusted then) or never read. */
  readonly signals: { load(now: number): LoadSignals | undefined };
}

/** One worker's saturation as /debug/route and the metrics show it. */
export interface WorkerSaturation {
  readonly worker: string;
  readonly saturated: boolean;
  readonly reason: SaturationReason | null;
  /** The engine queue as estimated now; null without a fresh reading. */
  readonly estimatedQueue: number | null;
  readonly kvUsage: number | null;
  readonly pendingPrefillChars: number;
}

/**
 * The engine's waiting queue now, estimated from its last fresh reading: the queue it reported,
 * moved by the change since then in this router's requests there without a first byte (each
 * dispatch joins the engine's queue or prefill, each first byte leaves them). The reading alone is
 * up to a poll interval old; the router's own count is exact and live, so between two readings the
 * estimate follows what this router did. Requests in prefill count too, which errs on the side of
 * holding back. undefined without a fresh reading of the queue: a stale one is never trusted.
 */
export function estimatedQueue(worker: SaturationView, now: number): number | undefined {
  const load = worker.signals.load(now);
  if (load?.queued === undefined) return undefined;
  const sinceReading = worker.pendingPrefillRequests - (load.routerPending ?? 0);
  return Math.max(0, load.queued + sinceReading);
}

/**
 * Why the worker is saturated now, or undefined when it is not. A worker without fresh engine
 * readings is judged only by the router's own live figure (pending prefill); one without either
 * is never saturated, so a fleet that exposes nothing routes as before.
 */
export function saturationReason(
  worker: SaturationView,
  thresholds: SaturationThresholds,
  now: number,
): SaturationReason | undefined {
  const pending = thresholds.pendingPrefillChars;
  if (pending > 0 && worker.pendingPrefillChars >= pending) return "pending_prefill";
  const load = worker.signals.load(now);
  if (load === undefined) return undefined;
  if (load.queued !== undefined) {
    const queue = load.queued + worker.pendingPrefillRequests - (load.routerPending ?? 0);
    if (queue >= thresholds.queueDepth) return "engine_queue";
  }
  if (load.kvUsage !== undefined && thresholds.kvUsage < 1 && load.kvUsage >= thresholds.kvUsage)
    return "kv_usage";
  return undefined;
}

/**
 * The fleet is saturated for a request when every candidate for it is; no candidate at all is not
 * saturation (the forwarder answers that: 503 or 404). Stops at the first worker with room, so
 * a fleet with room costs one check.
 */
export function fleetSaturated(
  candidates: readonly SaturationView[],
  thresholds: SaturationThresholds,
  now: number,
): boolean {
  if (candidates.length === 0) return false;
  for (const worker of candidates) {
    if (saturationReason(worker, thresholds, now) === undefined) return false;
  }
  return true;
}

/** Every candidate's saturation in full (for /debug/route and GET /workers, not the hot path). */
export function describeSaturation(
  worker: SaturationView,
  thresholds: SaturationThresholds,
  now: number,
): WorkerSaturation {
  const reason = saturationReason(worker, thresholds, now);
  return {
    worker: worker.id,
    saturated: reason !== undefined,
    reason: reason ?? null,
    estimatedQueue: estimatedQueue(worker, now) ?? null,
    kvUsage: worker.signals.load(now)?.kvUsage ?? null,
    pendingPrefillChars: worker.pendingPrefillChars,
  };
}
