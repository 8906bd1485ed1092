/**
 * The simulated engine: continuous batching over a FIFO waiting queue, as vLLM and SGLang schedule.
 *
 * Each step (one forward pass) takes, within a token budget (`maxBatchTokens`): one token for every
 * decoding sequence, then prefill chunks for sequences still prefilling, then admits waiting
 * sequences in arrival order while there is a free slot (`maxRunning`), budget, and KV room. A
 * sequence whose prefill completes emits its first token at the end of that step; afterwards it
 * emits one token per step. A step lasts stepDurationMs(shape) × delayFactor().
 *
 * Time is virtual and catches up: each step starts when the previous one ended, and steps whose
 * end is already past run back to back without a timer. Small time scales therefore keep their
 * aggregate throughput even though timers cannot fire more often than once per millisecond, and a
 * delay factor of 0 runs every request to completion synchronously.
 */
import type { Clock } from "./clock.js";
import { EngineGauges, type GaugeRule, type GaugeValues } from "./engine-gauges.js";
import type { KvAllocation, PrefixKvCache } from "./kv-cache.js";
import { generatedTokenIds } from "./output-text.js";
import { type PriorityOrder, urgency } from "./priority-order.js";
import { preemptionVictims } from "./priority-preemption.js";
import { type StepShape, stepDurationMs, type TimingModel } from "./timing.js";

/** Receives a sequence's progress. Called synchronously from the engine's step loop. */
export interface SequenceSink {
  /** The sequence left the queue; `cachedTokens` of its prompt were found in the KV cache. */
  onAdmit?(cachedTokens: number): void;
  /** Output token `index` (0-based) was produced. */
  onToken(index: number): void;
  /** Every requested token was produced (or, for maxTokens = 0, the prompt was prefilled). */
  onFinish(): void;
}

export interface SequenceSpec {
  promptTokens: readonly number[];
  /** Output tokens to generate; 0 = prefill only (embeddings). */
  maxTokens: number;
  sink: SequenceSink;
  /** The body's `priority` (engine/priority-order.ts: its direction is the engine's); default 0. */
  priority?: number;
}

export type SequenceState = "waiting" | "running" | "finished" | "aborted";

export interface SequenceHandle {
  readonly state: SequenceState;
  readonly cachedTokens: number;
  readonly generated: number;
  /** Stop the sequence: it leaves the queue or the batch and its KV pins are released. */
  abort(): void;
}

export interface EngineOptions {
  timing: TimingModel;
  /** Most sequences in the running batch. */
  maxRunning: number;
  /** Most tokens one step processes (decode tokens + prefill chunks). */
  maxBatchTokens: number;
  /** Real milliseconds per model millisecond (timeScale × slowdown), read at every step. */
  delayFactor: () => number;
  /** Model ms a submitted sequence waits before it may join a step (× delayFactor); default 0. */
  firstTokenDelayMs?: number;
  /**
   * Told of every step as it is planned: when it starts, how long it lasts (real ms) and what it
   * computes. For analysis (bench/ttft-decomposition.ts splits each request's TTFT with it).
   */
  onStep?: (start: number, durationMs: number, shape: Readonly<StepShape>) => void;
  /**
   * Priority scheduling (vLLM --scheduling-policy priority: lower value first; SGLang
   * --enable-priority-scheduling: higher first): the waiting queue is ordered by priority, then
   * arrival. Undefined = first come, first served.
   */
  priorityOrder?: PriorityOrder;
  /**
   * With priorityOrder, SGLang's preemption (--priority-scheduling-preemption-threshold, default
   * 10): a waiting sequence that finds the batch full (maxRunning) preempts running ones less
   * urgent than it by more than this, only as many as it needs (sim/priority-preemption.ts).
   * Undefined = never preempted for a waiting sequence: vLLM's v1 scheduler (it preempts only when
   * a running request cannot get a KV block, which never happens here: a sequence's whole KV is
   * reserved at admission) and SGLang with --disable-priority-preemption.
   */
  preemptionThreshold?: number;
  /**
   * SGLang's step rule: a step with prefill work (a chunked prefill to go on, waiting sequences to
   * admit) runs that prefill alone, and the running sequences decode only in steps without any
   * (python/sglang/srt/managers/scheduler.py get_next_batch_to_run: "Run prefill first if
   * possible"; mixed steps only with --enable-mixed-chunk, off by default). False (the default):
   * vLLM's v1 rule, every step decodes the running sequences first and fills the rest of its token
   * budget with prefill (vllm/v1/core/sched/scheduler.py schedule: running requests, then
   * waiting ones while len(running) < max_num_seqs).
   */
  prefillFirst?: boolean;
  /**
   * How KV loaded back from the CPU tier is scheduled (kv-cache.ts), as the engines do it:
   * - "async" (the default), vLLM's offloading connector: its get_num_new_matched_tokens answers
   *   that the hit loads asynchronously, the request waits (WAITING_FOR_REMOTE_KVS) while the
   *   transfer runs on its own stream between scheduler steps, and joins a step once loaded
   *   (vllm/distributed/kv_transfer/kv_connector/v1/offloading/scheduler.py,
   *   vllm/v1/core/sched/scheduler.py). The batch keeps stepping; loads share one link, in turn.
   * - "layerwise", SGLang's HiCache: the load back is started with the prefill batch and each
   *   layer's forward waits only for that layer's transfer (python/sglang/srt/managers/
   *   cache_controller.py LayerDoneCounter, LayerLoadingEvent), so the step lasts the longer of
   *   its compute and the transfer (timing.ts stepDurationMs).
   */
  loadRule?: "async" | "layerwise";
  /** When its /metrics gauges change (sim/engine-gauges.ts); default "live". */
  gaugeRule?: GaugeRule;
}

class Sequence implements SequenceHandle {
  state: SequenceState = "waiting";
  cachedTokens = 0;
  generated = 0;
  /** Prompt tokens with KV (cached or prefilled). */
  computed = 0;
  alloc: KvAllocation | undefined;
  /** Admitted once already (a preempted sequence is told of its first admission only). */
  admitted = false;
  /** When it last entered the waiting queue: its arrival, or when it was preempted. */
  queuedAt: number;
  /** What its prefill computes: the prompt, after a preemption with the output so far. */
  prefillTokens: readonly number[];
  /** With loadRule "async": when its KV loaded from the CPU tier is in place (virtual time). */
  loadedAt = 0;

  constructor(
    readonly engine: Engine,
    readonly promptTokens: readonly number[],
    readonly maxTokens: number,
    readonly sink: SequenceSink,
    readonly arrival: number,
    /** Lower is served first (the engine's priority in its own direction). */
    readonly urgency: number,
  ) {
    this.queuedAt = arrival;
    this.prefillTokens = promptTokens;
  }

  abort(): void {
    this.engine.abortSequence(this);
  }
}

interface PlanEntry {
  seq: Sequence;
  /** Prefill chunk length; 0 for a decode step. */
  prefill: number;
}

interface StepPlan {
  entries: PlanEntry[];
  shape: StepShape;
}

export class Engine {
  private readonly waitingQueue: Sequence[] = [];
  private readonly runningBatch: Sequence[] = [];
  private timer: unknown;
  /** The pending timer only wakes the loop (a load to finish, an arrival), no step ends then. */
  private timerWakes = false;
  /** With loadRule "async": when the CPU→GPU link is free again (loads go one after another). */
  private linkFreeAt = 0;
  private pumping = false;
  private stopped = false;
  private stepCount = 0;
  private readonly gauges: EngineGauges;

  constructor(
    private readonly options: EngineOptions,
    private readonly kv: PrefixKvCache,
    private readonly clock: Clock,
  ) {
    this.gauges = new EngineGauges(options.gaugeRule ?? "live", () => ({
      running: this.runningBatch.length,
      waiting: this.waitingQueue.length,
      kvUsage: this.kv.activeUsage,
    }));
    if (!Number.isInteger(options.maxRunning) || options.maxRunning < 1) {
      throw new RangeError(`maxRunning must be a positive integer, got ${options.maxRunning}`);
    }
    if (!Number.isInteger(options.maxBatchTokens) || options.maxBatchTokens < 1) {
      throw new RangeError(
        `maxBatchTokens must be a positive integer, got ${options.maxBatchTokens}`,
      );
    }
    const threshold = options.preemptionThreshold;
    if (threshold !== undefined && !(Number.isFinite(threshold) && threshold >= 0)) {
      throw new RangeError(`preemptionThreshold must be a number >= 0, got ${threshold}`);
    }
  }

  /** Whether a sequence of this size can ever be admitted (it fits in the whole KV pool). */
  fits(promptTokens: number, maxTokens: number): boolean {
    return this.kv.blocksFor(promptTokens + maxTokens) <= this.kv.totalBlocks;
  }

  submit(spec: SequenceSpec): SequenceHandle {
    if (this.stopped) throw new Error("engine stopped");
    if (spec.promptTokens.length === 0) throw new RangeError("empty prompt");
    if (!this.fits(spec.promptTokens.length, spec.maxTokens)) {
      throw new RangeError("prompt + maxTokens exceed the KV cache capacity");
    }
    // A later arrival keeps the queue in order: every sequence waits the same delay.
    const delay = (this.options.firstTokenDelayMs ?? 0) * this.options.delayFactor();
    const seq = new Sequence(
      this,
      spec.promptTokens,
      spec.maxTokens,
      spec.sink,
      this.clock.now() + delay,
      urgency(this.options.priorityOrder, spec.priority ?? 0),
    );
    this.enqueue(seq);
    if (this.timerWakes && !this.pumping) {
      // Waiting for a load only: the newcomer may start a step before it ends.
      this.clock.clearTimer(this.timer);
      this.timer = undefined;
      this.timerWakes = false;
    }
    if (this.timer === undefined && !this.pumping) this.pump(seq.arrival);
    return seq;
  }

  get running(): number {
    return this.runningBatch.length;
  }

  get waiting(): number {
    return this.waitingQueue.length;
  }

  /** What the engine's /metrics gauges say now: its last update, by its gauge rule. */
  reported(): GaugeValues {
    const idle = this.runningBatch.length === 0 && this.waitingQueue.length === 0;
    return this.gauges.read(this.clock.now(), idle, this.options.delayFactor());
  }

  /** Steps executed so far. */
  get steps(): number {
    return this.stepCount;
  }

  /** Abort everything and stop stepping; the engine accepts nothing afterwards. */
  stop(): void {
    this.stopped = true;
    if (this.timer !== undefined) this.clock.clearTimer(this.timer);
    this.timer = undefined;
    for (const seq of [...this.runningBatch, ...this.waitingQueue]) this.abortSequence(seq);
  }

  /** @internal Called by SequenceHandle.abort. */
  abortSequence(seq: Sequence): void {
    if (seq.state === "waiting") {
      const i = this.waitingQueue.indexOf(seq);
      if (i >= 0) this.waitingQueue.splice(i, 1);
    } else if (seq.state === "running") {
      this.leaveBatch(seq);
    } else {
      return;
    }
    seq.state = "aborted";
  }

  /**
   * Run steps from virtual time `start` (after applying a step that has just ended, if any) until
   * a step ends in the future (then wait for it) or there is nothing left to do.
   */
  private pump(start: number, ended?: StepPlan): void {
    this.pumping = true;
    try {
      if (ended !== undefined) this.apply(ended, start);
      let t = start;
      while (!this.stopped) {
        const plan = this.plan(t);
        if (plan === undefined) {
          const head = this.waitingQueue[0];
          // Catching up: the head arrived after this (past) step would have started.
          if (head !== undefined && head.arrival > t) {
            t = head.arrival;
            continue;
          }
          // Nothing to step but loads under way: wake when the first is in place.
          const loaded = this.nextLoadedAt(t);
          if (loaded !== undefined) {
            const now = this.clock.now();
            if (loaded > now) {
              this.timerWakes = true;
              this.timer = this.clock.setTimer(() => {
                this.timer = undefined;
                this.timerWakes = false;
                this.pump(loaded);
              }, loaded - now);
              return;
            }
            t = loaded;
            continue;
          }
          if (head !== undefined) {
            // Unreachable: with nothing running every block is evictable and submit() checked fit.
            throw new Error("simulated engine stalled with an admissible queue head");
          }
          return;
        }
        const duration =
          stepDurationMs(this.options.timing, plan.shape) * this.options.delayFactor();
        this.options.onStep?.(t, duration, plan.shape);
        const end = t + duration;
        const now = this.clock.now();
        if (end > now) {
          this.timer = this.clock.setTimer(() => {
            this.timer = undefined;
            this.pump(end, plan);
          }, end - now);
          return;
        }
        this.apply(plan, end);
        t = end;
      }
    } finally {
      this.pumping = false;
    }
  }

  /** Choose the work of a step starting at virtual time t; undefined when there is none. */
  private plan(t: number): StepPlan | undefined {
    const entries: PlanEntry[] = [];
    const shape: StepShape = { prefillTokens: 0, decodeSeqs: 0, seqs: 0, contextTokens: 0 };
    let budget = this.options.maxBatchTokens;
    const prefillFirst = this.options.prefillFirst === true;
    let decodingBefore = 0;
    for (const seq of this.runningBatch)
      if (seq.computed >= seq.prefillTokens.length) decodingBefore++;
    if (!prefillFirst) budget -= this.addDecodes(entries, shape, budget);
    for (const seq of this.runningBatch) {
      if (budget === 0) break;
      if (seq.computed >= seq.prefillTokens.length || seq.loadedAt > t) continue;
      budget -= this.addPrefill(entries, shape, seq, budget);
    }
    const preempted: Sequence[] = [];
    let admitted = 0;
    while (budget > 0) {
      const head = this.waitingQueue[0];
      if (head === undefined || head.arrival > t) break;
      if (this.runningBatch.length >= this.options.maxRunning) {
        const victims = this.victimsFor(head);
        if (victims.length === 0) break;
        for (const victim of victims) budget += this.preempt(victim, t, entries, shape);
        preempted.push(...victims);
      }
      const alloc = this.kv.allocate(head.prefillTokens, head.promptTokens.length + head.maxTokens);
      if (alloc === undefined) break; // FIFO: the head waits for KV room, and so do those behind it.
      this.waitingQueue.shift();
      admitted++;
      head.state = "running";
      head.alloc = alloc;
      head.cachedTokens = alloc.cachedTokens;
      head.computed = alloc.cachedTokens;
      this.runningBatch.push(head);
      if (!head.admitted) head.sink.onAdmit?.(alloc.cachedTokens);
      head.admitted = true;
      if (alloc.loadedTokens > 0) {
        if (this.options.loadRule === "layerwise") {
          // This step's layers wait for their share of the transfer.
          shape.loadedTokens = (shape.loadedTokens ?? 0) + alloc.loadedTokens;
        } else {
          // Off the step loop: the sequence joins a step once its blocks are in place.
          const start = Math.max(t, this.linkFreeAt);
          const ms = (alloc.loadedTokens * 1000) / this.options.timing.offloadTokensPerSec;
          head.loadedAt = start + ms * this.options.delayFactor();
          this.linkFreeAt = head.loadedAt;
          continue;
        }
      }
      budget -= this.addPrefill(entries, shape, head, budget);
    }
    // Back in the queue after this step's admissions, as SGLang requeues its preempt_list.
    for (const victim of preempted) this.enqueue(victim);
    // SGLang: no prefill to run, so the running batch decodes.
    if (prefillFirst && entries.length === 0) this.addDecodes(entries, shape, budget);
    shape.seqs = entries.length;
    if (entries.length === 0) return undefined;
    // SGLang logs a prefill batch: a step that prefills or admits anyone (a cached prompt too).
    const prefills = entries.some((e) => e.prefill > 0) || admitted > 0;
    this.gauges.stepPlanned(t, prefills, decodingBefore);
    return { entries, shape };
  }

  /** The earliest time after `t` a running sequence's load is in place; undefined: none loading. */
  private nextLoadedAt(t: number): number | undefined {
    let next: number | undefined;
    for (const seq of this.runningBatch) {
      if (seq.loadedAt > t && (next === undefined || seq.loadedAt < next)) next = seq.loadedAt;
    }
    return next;
  }

  /** One decode token for each running sequence past its prefill, within `budget`; returns the tokens used. */
  private addDecodes(entries: PlanEntry[], shape: StepShape, budget: number): number {
    let used = 0;
    for (const seq of this.runningBatch) {
      if (used === budget) break;
      if (seq.computed < seq.prefillTokens.length) continue;
      entries.push({ seq, prefill: 0 });
      used++;
      shape.decodeSeqs++;
      shape.contextTokens += seq.promptTokens.length + seq.generated;
    }
    return used;
  }

  /** Waiting in order: by urgency, then arrival (FCFS when every urgency is 0). */
  private enqueue(seq: Sequence): void {
    let i = this.waitingQueue.length;
    while (i > 0 && (this.waitingQueue[i - 1] as Sequence).urgency > seq.urgency) i--;
    this.waitingQueue.splice(i, 0, seq);
  }

  /**
   * The running sequences `head` preempts on finding the batch full: SGLang tries only then
   * (python/sglang/srt/managers/scheduler.py get_new_batch_prefill, batch_is_full).
   */
  private victimsFor(head: Sequence): Sequence[] {
    const threshold = this.options.preemptionThreshold;
    if (this.options.priorityOrder === undefined || threshold === undefined) return [];
    const lacking = this.kv.shortfallBlocks(
      head.prefillTokens,
      head.promptTokens.length + head.maxTokens,
    );
    // Only sequences past their prefill: SGLang's running batch holds those alone. A chunked
    // prefill under way is kept apart (scheduler.py moves `chunked_req` out of the batch before
    // merging it into `running_batch`) and goes on first in the next prefill batch
    // (PrefillAdder.add_chunked_req), so it is never a victim; nor is a request admitted in this
    // step (it joins `running_batch` only after the step).
    const decoding = this.runningBatch.filter((seq) => seq.computed >= seq.prefillTokens.length);
    return preemptionVictims(head, decoding, threshold, lacking, (seq) =>
      seq.alloc === undefined ? 0 : this.kv.releasableBlocks(seq.alloc),
    );
  }

  /**
   * Take `seq` out of the batch and out of the step being planned; it waits again and, admitted
   * again, recomputes its prompt and output so far (its KV is freed, the prefix cache keeps what
   * was cached), as the engines resume a preempted request. Returns the step's tokens it gives back.
   */
  private preempt(seq: Sequence, t: number, entries: PlanEntry[], shape: StepShape): number {
    const i = entries.findIndex((e) => e.seq === seq);
    const prefill = i >= 0 ? (entries.splice(i, 1)[0] as PlanEntry).prefill : undefined;
    if (prefill === 0) {
      shape.decodeSeqs--;
      shape.contextTokens -= seq.promptTokens.length + seq.generated;
    } else if (prefill !== undefined) {
      shape.prefillTokens -= prefill;
      shape.contextTokens -= seq.computed + prefill;
    }
    this.leaveBatch(seq);
    seq.alloc = undefined;
    seq.computed = 0;
    seq.loadedAt = 0;
    seq.prefillTokens = seq.promptTokens.concat(generatedTokenIds(seq.generated));
    seq.state = "waiting";
    seq.queuedAt = t;
    return prefill === undefined ? 0 : Math.max(prefill, 1);
  }

  private addPrefill(
    entries: PlanEntry[],
    shape: StepShape,
    seq: Sequence,
    budget: number,
  ): number {
    const chunk = Math.min(seq.prefillTokens.length - seq.computed, budget);
    entries.push({ seq, prefill: chunk });
    shape.prefillTokens += chunk;
    shape.contextTokens += seq.computed + chunk;
    return chunk;
  }

  /** The step has ended: advance every sequence in it. */
  private apply(plan: StepPlan, end: number): void {
    this.stepCount++;
    for (const { seq, prefill } of plan.entries) {
      if (seq.state !== "running") continue; // aborted during the step
      if (prefill > 0) {
        seq.computed += prefill;
        this.kv.commit(seq.alloc as KvAllocation, seq.prefillTokens, seq.computed);
        if (seq.computed < seq.prefillTokens.length) continue;
        if (seq.maxTokens === 0) {
          this.finish(seq);
          continue;
        }
      }
      seq.generated++;
      seq.sink.onToken(seq.generated - 1);
      if (seq.state === "running" && seq.generated >= seq.maxTokens) this.finish(seq);
    }
    this.gauges.stepEnded(end);
  }

  private finish(seq: Sequence): void {
    // The output's full blocks are cached too, so a follow-up turn that re-sends the reply hits.
    const sequence = seq.promptTokens.concat(generatedTokenIds(seq.generated));
    this.kv.commit(seq.alloc as KvAllocation, sequence, sequence.length);
    this.leaveBatch(seq);
    seq.state = "finished";
    seq.sink.onFinish();
  }

  private leaveBatch(seq: Sequence): void {
    const i = this.runningBatch.indexOf(seq);
    if (i >= 0) this.runningBatch.splice(i, 1);
    if (seq.alloc !== undefined) this.kv.release(seq.alloc);
  }
}
