/**
 * When a simulated engine's /metrics gauges (running, waiting, KV usage) change. A real engine does
 * not count its queue at every scrape: it sets the gauges from its scheduler loop, and a read
 * between two updates sees the last one. The rules, from the engines' source:
 *
 * - vLLM v1 ("step"): after every engine step. Scheduler.update_from_output attaches make_stats()
 *   (len(self.running), len(self.waiting)) to the step's outputs, and PrometheusStatLogger.record
 *   sets vllm:num_requests_running/waiting from them (vllm/v1/core/sched/scheduler.py,
 *   vllm/v1/metrics/loggers.py). Requests that arrived during a step count from the next one.
 * - SGLang ({ decodeLogInterval }): SchedulerMetricsMixin.log_prefill_stats at every prefill batch
 *   (get_new_batch_prefill): sglang:num_running_reqs is the running batch before the batch's new
 *   requests join it, sglang:num_queue_reqs the waiting queue after they left it; log_decode_stats
 *   only every --decode-log-interval decode batches (default 40; process_batch_result_decode in
 *   scheduler_output_processor_mixin.py); and, while idle, every 30 s (check_memory in
 *   scheduler_runtime_checker_mixin.py). A full batch that only decodes (no prefill: nothing can
 *   join it) shows its last update for up to 40 steps, and the last requests' ends stay unseen
 *   until the idle update 30 s later or the next prefill.
 * - "live": every read sees the engine as it is (tests that need exact readings at once).
 */

export type GaugeRule = "live" | "step" | { decodeLogInterval: number };

export interface GaugeValues {
  running: number;
  waiting: number;
  kvUsage: number;
}

/** SGLang's idle update (scheduler check_memory: `last_log_time + 30`), model ms. */
const SGLANG_IDLE_LOG_MS = 30_000;

export class EngineGauges {
  private values: GaugeValues = { running: 0, waiting: 0, kvUsage: 0 };
  /** Clock time of the last update. */
  private setAt = Number.NEGATIVE_INFINITY;
  private decodeSteps = 0;

  constructor(
    private readonly rule: GaugeRule,
    /** The engine as it is now. */
    private readonly live: () => GaugeValues,
  ) {}

  /**
   * A step was planned at clock time `t`. `decodingBefore`: the running sequences past their
   * prefill before this step admitted anyone (SGLang's running_bs).
   */
  stepPlanned(t: number, hasPrefill: boolean, decodingBefore: number): void {
    if (typeof this.rule !== "object") return;
    if (hasPrefill) {
      const now = this.live();
      this.set(t, { ...now, running: Math.min(decodingBefore, now.running) });
      return;
    }
    this.decodeSteps += 1;
    if (this.decodeSteps % this.rule.decodeLogInterval === 0) this.set(t, this.live());
  }

  /** A step ended at clock time `t`. */
  stepEnded(t: number): void {
    if (this.rule === "step") this.set(t, this.live());
  }

  /** What a scrape at clock time `now` reads; `delayFactor`: real ms per model ms. */
  read(now: number, idle: boolean, delayFactor: number): GaugeValues {
    if (this.rule === "live") return this.live();
    if (
      typeof this.rule === "object" &&
      idle &&
      now - this.setAt >= SGLANG_IDLE_LOG_MS * delayFactor
    )
      this.set(now, this.live());
    return this.values;
  }

  private set(t: number, values: GaugeValues): void {
    this.values = values;
    this.setAt = t;
  }
}
