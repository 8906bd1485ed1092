/**
 * The direction of an engine's priority field under priority scheduling: vLLM serves a lower
 * value first (vllm/config/scheduler.py `policy`), SGLang a higher one unless started with
 * --schedule-low-priority-values-first (python/sglang/srt/server_args.py).
 */
export type PriorityOrder = "lower-first" | "higher-first";

/** A sequence's urgency: lower is served first; 0 for every sequence without priority scheduling. */
export function urgency(order: PriorityOrder | undefined, priority: number): number {
  if (order === undefined || !Number.isFinite(priority)) return 0;
  return order === "lower-first" ? priority : -priority;
}

/** The order the simulated engine uses with priority scheduling on: its flavor's. */
export function priorityOrderOf(flavor: "sglang" | "vllm"): PriorityOrder {
  return flavor === "vllm" ? "lower-first" : "higher-first";
}
