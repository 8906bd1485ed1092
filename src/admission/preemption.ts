import type { SaturationView } from "../workers/saturation.js";

/** SGLang's --priority-scheduling-preemption-threshold by default (python/sglang/srt/server_args.py). */
export const SGLANG_PREEMPTION_THRESHOLD = 10;

/** The engine's preemption threshold as it said it (/get_server_info), else SGLang's default. */
export function preemptionThresholdOf(worker: SaturationView): number {
  return worker.signals.preemptionThreshold ?? SGLANG_PREEMPTION_THRESHOLD;
}

/**
 * How far below its priority a tenant over its share reaches the engine: one more than the
 * largest preemption threshold among the candidates, so that another tenant's request of the
 * same priority is above it by more than the threshold and the engine preempts it for them.
 */
export function yieldDepth(candidates: readonly SaturationView[]): number {
  let threshold = candidates.length === 0 ? SGLANG_PREEMPTION_THRESHOLD : 0;
  for (const worker of candidates) threshold = Math.max(threshold, preemptionThresholdOf(worker));
  return threshold + 1;
}
