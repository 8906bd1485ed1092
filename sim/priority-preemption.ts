/**
 * Which running sequences a waiting one preempts, as SGLang's priority scheduling chooses them
 * (python/sglang/srt/managers/schedule_policy.py, PrefillAdder.preempt_to_schedule): the running
 * ones least urgent first, the latest queued first among equals; each must be less urgent than
 * the waiting one by more than --priority-scheduling-preemption-threshold (default 10), and no
 * more are taken than free the room the waiting one lacks (at least one: a slot). When those that
 * qualify cannot free enough, none is preempted.
 *
 * vLLM's v1 scheduler never preempts for a waiting request (vllm/v1/core/sched/scheduler.py: the
 * waiting loop stops at max_num_seqs); the engine does not call this for that flavor.
 */

export interface PreemptionCandidate {
  /** Lower is served first (sim/priority-order.ts). */
  readonly urgency: number;
  /** When it last entered the waiting queue (SGLang's wait_queue_entry_time). */
  readonly queuedAt: number;
}

/**
 * The running sequences `waiting` preempts, in SGLang's order; empty when it preempts none.
 * `lacking` is what it needs beyond the free room (KV blocks here; SGLang counts tokens), and
 * `frees` what preempting one sequence gives back.
 */
export function preemptionVictims<T extends PreemptionCandidate>(
  waiting: PreemptionCandidate,
  running: readonly T[],
  threshold: number,
  lacking: number,
  frees: (seq: T) => number,
): T[] {
  // Reversed first: among full ties the one admitted last goes first (the sort is stable).
  const order = [...running]
    .reverse()
    .sort((a, b) => b.urgency - a.urgency || b.queuedAt - a.queuedAt);
  const victims: T[] = [];
  let still = lacking;
  for (const seq of order) {
    // SGLang: priority_diff > threshold, in the engine's own direction.
    if (seq.urgency - waiting.urgency <= threshold) break;
    victims.push(seq);
    still -= frees(seq);
    if (still <= 0) return victims;
  }
  return [];
}
