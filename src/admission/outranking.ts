/**
 * --engine-priority with --queue-when-saturated: a request may go to a saturated worker when what
 * fills it is this router's work of strictly lower priority. The engine's priority scheduler puts
 * that work behind the request (the simulator and SGLang preempt the least urgent running request
 * for it, SGLang only past --priority-scheduling-preemption-threshold, python/sglang/srt/managers/
 * schedule_policy.py `preempt_to_schedule`; vLLM's v1 scheduler does not preempt for a free slot,
 * vllm/v1/core/sched/scheduler.py, but queues it first, ahead of every lower priority), so holding
 * it in the router behind that work only adds the router's wait to the engine's.
 */
import {
  estimatedQueue,
  fullBatchOf,
  kvSaturated,
  type SaturationThresholds,
  type SaturationView,
} from "../workers/saturation.js";

/**
 * Whether the worker has room for a request the engine gets with `priority` (the router's
 * higher-first scale) because its saturation is lower-priority work. All must hold:
 * - a fresh engine reading and the engine's batch as last seen full (nothing is guessed);
 * - neither this router's pending prefill nor KV usage saturates it (only the queue is lifted);
 * - this router's requests there that are not known to be below `priority` (those sent without
 *   one included) are fewer than that batch: the request takes a batch slot at once;
 * - the engine queue as estimated without this router's lower-priority requests is below
 *   --saturation-queue-depth (other clients' work, of unknown priority, counts as ahead).
 * Bounded: each request let go this way joins the not-below count there, so at most a full batch
 * of requests of each priority goes ahead of lower work, and none without --engine-priority (the
 * tally is empty then).
 */
export function outranksLowerWork(
  worker: SaturationView,
  priority: number,
  thresholds: SaturationThresholds,
  now: number,
): boolean {
  const own = worker.ownInFlight;
  if (own === undefined || worker.ownInFlightBelow === undefined) return false;
  if (worker.signals.load(now)?.queued === undefined) return false;
  // Estimated first: a fresh reading that shows a queue is where the batch size is learned.
  const queue = estimatedQueue(worker, now);
  const batch = fullBatchOf(worker);
  if (queue === undefined || batch === undefined) return false;
  const pending = thresholds.pendingPrefillChars;
  if (pending > 0 && worker.pendingPrefillChars >= pending) return false;
  if (kvSaturated(worker, thresholds, now)) return false;
  const lower = worker.ownInFlightBelow(priority);
  // At depth 0 (a full batch saturates) the batch-slot condition alone says it.
  return own - lower < batch && Math.max(0, queue - lower) < Math.max(1, thresholds.queueDepth);
}

/** The candidates where the request has room only by outranking (for /debug/route). */
export function outrankedOn(
  candidates: readonly SaturationView[],
  priority: number,
  thresholds: SaturationThresholds,
  now: number,
): string[] {
  return candidates.filter((w) => outranksLowerWork(w, priority, thresholds, now)).map((w) => w.id);
}
