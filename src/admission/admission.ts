import {
  describeSaturation,
  fleetSaturated,
  freeSlots,
  pairSides,
  type SaturationThresholds,
  type SaturationView,
  saturationReason,
  type WorkerSaturation,
} from "../workers/saturation.js";
import { type AdmissionQueue, bandRoom, prefillIdle, type WaitCause } from "./admission-queue.js";
import { outrankedOn, outranksLowerWork } from "./outranking.js";
import { preemptionThresholdOf, yieldDepth } from "./preemption.js";
import {
  AdmissionPipeline,
  type AdmissionRelease,
  type AdmissionStep,
  type AdmissionTicket,
  type StepExplanation,
} from "./step.js";

/** Background work of an admission step, started and stopped with the router. */
export interface AdmissionService {
  start(): Promise<void>;
  stop(): void;
}

/** An admitted request's way out of admission (Admission.pass). */
export interface AdmissionPass {
  /** Call when the request ends, with how it ended (a quota charges what the engine reported). */
  readonly release: AdmissionRelease;
  /** The priority its engine gets (--engine-priority); undefined = none. */
  readonly priority: number | undefined;
  /** Where it has room (roomFor); undefined = every candidate. */
  readonly roomOn: ((worker: SaturationView) => boolean) | undefined;
  /** It waited in the queue. */
  readonly waited: boolean;
}

/**
 * Whether going to the engine at `demoted` (one step lower by default) would cost the request the
 * preemption it gets at `priority`: on some candidate, this router's lowest-priority request in
 * flight is more than the engine's preemption threshold below `priority` but not below `demoted`
 * (SGLang preempts only for a gap above the threshold: python/sglang/srt/managers/
 * schedule_policy.py `preempt_to_schedule`). The threshold is the engine's word
 * (/get_server_info), else SGLang's default. A tenant's own high-priority request is thus never
 * demoted to within the threshold of its flood.
 */
export function demotionLosesPreemption(
  candidates: readonly SaturationView[],
  priority: number,
  demoted = priority - 1,
): boolean {
  for (const worker of candidates) {
    const lowest = worker.lowestEnginePriority?.();
    if (lowest === undefined) continue;
    const threshold = preemptionThresholdOf(worker);
    if (priority - lowest > threshold && demoted - lowest <= threshold) return true;
  }
  return false;
}

/** What /debug/route says about admission for one request. */
export interface AdmissionExplanation {
  tenant: string;
  priority: number;
  /** Whether the request would wait in the router's queue if it came now, and why. */
  would_queue: boolean;
  cause: WaitCause | null;
  queue_enabled: boolean;
  queue_when_saturated: boolean;
  waiting: number;
  running: number;
  /** Every candidate's saturation: the fleet is saturated for the request when all are. */
  workers: WorkerSaturation[];
  /** With --engine-priority: the priority the engine would get (null without). */
  engine_priority: number | null;
  /**
   * Saturated candidates where it has room all the same, because it outranks the lower-priority
   * work of this router that fills them (--engine-priority; admission/outranking.ts).
   */
  outranks_running_work_on: string[];
  /** What each step before the queue would do now, by its name (`quota`: the tenant's quota). */
  steps: Record<string, StepExplanation>;
}

/**
 * Admission as the routes see it: the steps a request passes between intake and routing (today
 * the queue; a quota step joins before it), and the explanation of /debug/route.
 */
export class Admission {
  private readonly pipeline: AdmissionPipeline;

  constructor(
    readonly queue: AdmissionQueue,
    private readonly thresholds: SaturationThresholds,
    private readonly queueWhenSaturated: boolean,
    /** Steps before the queue (a quota check). */
    private readonly before: readonly AdmissionStep[] = [],
    /** What those steps run in the background (a watched file, a Redis connection). */
    private readonly services: readonly AdmissionService[] = [],
    /** --engine-priority: the engine's scheduler serves by the priority the router passes on. */
    private readonly enginePriorityOn = false,
  ) {
    this.pipeline = new AdmissionPipeline([...before, queue]);
    if (this.outranking) {
      queue.releaseOutrankingWith((ticket, now) => {
        const priority = this.enginePriority(ticket);
        const has = (w: SaturationView) => outranksLowerWork(w, priority, thresholds, now);
        const candidates = ticket.candidates();
        // A pair needs room on both sides: each has a worker with room or one it outranks on.
        const sides = pairSides(candidates);
        if (sides === undefined) return candidates.some(has);
        const room = (w: SaturationView) => saturationReason(w, thresholds, now) === undefined;
        return sides.every((side) => side.some((w) => room(w) || has(w)));
      });
    }
  }

  /** Whether a request may go over lower-priority work (outranking.ts): both flags on. */
  private get outranking(): boolean {
    return this.enginePriorityOn && this.queueWhenSaturated;
  }

  /** Starts the steps' background work (bounded: never fails for an unreachable Redis). */
  async start(): Promise<void> {
    for (const service of this.services) await service.start();
  }

  stop(): void {
    for (const service of this.services) service.stop();
  }

  /** Requests waiting in the queue now. */
  get waiting(): number {
    return this.queue.waiting;
  }

  /** Requests admitted and not ended (counted while the queue is enabled). */
  get running(): number {
    return this.queue.running;
  }

  /** Resolves with a release once the request may go; call it when the request ends. */
  admit(ticket: AdmissionTicket): AdmissionRelease | Promise<AdmissionRelease> {
    return this.pipeline.admit(ticket);
  }

  /**
   * The admit stage in one call: once the request may go, its release, the priority its engine
   * gets (--engine-priority) and where it has room (roomFor), worked out as it leaves (a promise
   * only when it waits).
   */
  pass(ticket: AdmissionTicket): AdmissionPass | Promise<AdmissionPass> {
    const admitting = this.pipeline.admit(ticket);
    if (typeof admitting === "function") return this.passing(ticket, admitting, false);
    return admitting.then((release) => this.passing(ticket, release, true));
  }

  private passing(ticket: AdmissionTicket, release: AdmissionRelease, waited: boolean) {
    const priority = this.enginePriorityOn ? this.enginePriority(ticket, true) : undefined;
    return { release, priority, roomOn: this.roomFor(ticket, priority), waited };
  }

  /**
   * The priority the engine's scheduler gets (--engine-priority, proxy/engine-priority.ts): the
   * request's, lower while its tenant takes more than its share of that priority's work:
   * - With the tenants' shares of the batch slots known (--queue-when-saturated, every
   *   candidate's cap known): while its tenant holds at least its fair share of the slots and
   *   another tenant asked at the same priority in the last 2 s (tenant-share.ts
   *   yieldsAtEngine), `yieldDepth` lower: past the engine's preemption threshold, so SGLang
   *   preempts its running work for the other tenant's request at the next step instead of
   *   letting that request wait for an end. It stays that low while its tenant has such work in
   *   flight, so its own next request never outranks it. A tenant alone at its priority keeps it.
   * - Otherwise, while its tenant holds more than half of the router's waiting requests of that
   *   priority (it floods that band), one step lower: the engine serves the others first.
   * Counted per band: a tenant flooding at a low priority keeps its high-priority requests where
   * they are, and never where the lower value would lose a preemption they have over this
   * router's work in flight (demotionLosesPreemption). `going`: the request leaves now (what it
   * gets is remembered).
   */
  enginePriority(ticket: AdmissionTicket, going = false): number {
    const { tenant, priority } = ticket.identity();
    const candidates = ticket.candidates();
    const yields = this.queue.yieldsAtEngine(ticket);
    if (yields === false) return priority;
    if (yields === true) {
      const demoted = priority - yieldDepth(candidates);
      // Already that low with work in flight: the gap to its own work is not a preemption to keep.
      const keeps = this.queue.yieldingAt(ticket);
      if (!keeps && demotionLosesPreemption(candidates, priority, demoted)) return priority;
      if (going) this.queue.yielded(ticket);
      return demoted;
    }
    const waiting = this.queue.waitingAt(priority, tenant);
    if (!(waiting.all > 0 && waiting.tenant * 2 > waiting.all)) return priority;
    return demotionLosesPreemption(candidates, priority) ? priority : priority - 1;
  }

  /**
   * Where the admitted request may go, for its first attempt to choose among (the forwarder
   * falls back to every candidate when none is left); undefined when it routes as any other
   * (--queue-when-saturated off).
   * - While some candidate is not saturated: those (saturation.ts). The request goes because one
   *   has room; the policy alone may prefer a saturated one (one holding its prefix, or, for
   *   prefix_cost, one with fewer characters pending while its batch is full), where it would
   *   wait in the engine's queue while the worker with room stays one short (issue 24).
   * - While every candidate is, with --engine-priority: those where it outranks the work that
   *   fills them (outranking.ts).
   */
  roomFor(
    ticket: AdmissionTicket,
    enginePriority: number | undefined,
  ): ((worker: SaturationView) => boolean) | undefined {
    if (!this.queueWhenSaturated) return undefined;
    // Without outranking, no need to ask whether every candidate is saturated: the forwarder
    // falls back to all of them when none has room.
    if (!this.outranking || enginePriority === undefined) return this.withRoom(ticket);
    if (!fleetSaturated(ticket.candidates(), this.thresholds, Date.now())) {
      return this.withRoom(ticket);
    }
    // A pair's side that is not saturated keeps its workers with room.
    return (worker) =>
      this.notSaturated(worker) ||
      outranksLowerWork(worker, enginePriority, this.thresholds, Date.now());
  }

  private readonly notSaturated = (worker: SaturationView): boolean =>
    saturationReason(worker, this.thresholds, Date.now()) === undefined;

  /**
   * While tenants share the slots (--tenant-reserve-slots, tenant-share.ts), the candidates with
   * a free batch slot when some has one, else those not saturated: a request let go starts at the
   * engine's next step, in the slot kept for it, instead of waiting in the engine's first-come
   * queue for an end (with --saturation-queue-depth 1 a worker whose batch is full still counts
   * as having room, and the policy could prefer it).
   */
  private withRoom(ticket: AdmissionTicket): (worker: SaturationView) => boolean {
    const room = this.withFreeSlot(ticket);
    // A request paced at the engines goes where none of this router's prompts is in prefill
    // (paced for a band above it, or by the reserve: into a free slot there too).
    const pace = this.queue.pacedAtEngine(ticket);
    if (pace === undefined) return room;
    const now = Date.now();
    const paced =
      pace === "free-slot"
        ? (worker: SaturationView) => bandRoom(worker, now) && room(worker)
        : (worker: SaturationView) => prefillIdle(worker) && room(worker);
    return ticket.candidates().some(paced) ? paced : room;
  }

  private withFreeSlot(ticket: AdmissionTicket): (worker: SaturationView) => boolean {
    if (!this.queue.sharingSlots(ticket)) return this.notSaturated;
    const now = Date.now();
    const hasFree = (w: SaturationView) => (freeSlots(w, now) ?? 0) > 0;
    const candidates = ticket.candidates();
    // A prefill/decode pair needs room on both sides: left to saturation alone.
    if (pairSides(candidates) !== undefined || !candidates.some(hasFree)) return this.notSaturated;
    return (worker) => hasFree(worker) && this.notSaturated(worker);
  }

  explain(ticket: AdmissionTicket, now = Date.now()): AdmissionExplanation {
    const { tenant, priority } = ticket.identity();
    const cause = this.queue.wouldWait(ticket);
    const enginePriority = this.enginePriorityOn ? this.enginePriority(ticket) : null;
    const candidates = ticket.candidates();
    const outranks =
      enginePriority !== null && this.outranking && fleetSaturated(candidates, this.thresholds, now)
        ? outrankedOn(candidates, enginePriority, this.thresholds, now)
        : [];
    return {
      tenant,
      priority,
      would_queue: cause !== null,
      cause,
      queue_enabled: this.queue.enabled,
      queue_when_saturated: this.queueWhenSaturated,
      waiting: this.queue.waiting,
      running: this.queue.running,
      workers: candidates.map((w) => describeSaturation(w, this.thresholds, now)),
      engine_priority: enginePriority,
      outranks_running_work_on: outranks,
      steps: this.explainSteps(ticket, now),
    };
  }

  private explainSteps(ticket: AdmissionTicket, now: number): Record<string, StepExplanation> {
    const steps: Record<string, StepExplanation> = {};
    for (const step of this.before) {
      const explained = step.explain?.(ticket, now);
      if (explained !== undefined) steps[step.name] = explained;
    }
    return steps;
  }
}
