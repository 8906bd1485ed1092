import type { AdmissionQueue, WaitCause } from "./admission-queue.js";
import {
  describeSaturation,
  type SaturationThresholds,
  type SaturationView,
  type WorkerSaturation,
  withRoom,
} from "./saturation.js";
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
  ) {
    this.pipeline = new AdmissionPipeline([...before, queue]);
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
   * The priority the engine's scheduler gets (--engine-priority, proxy/engine-priority.ts): the
   * request's, one step lower while its tenant holds more than half of the router's waiting
   * requests (it floods), so the engine serves the other tenants' requests of the same priority
   * before the flood's.
   */
  enginePriority(ticket: AdmissionTicket): number {
    const { tenant, priority } = ticket.identity();
    const waiting = this.queue.waiting;
    return waiting > 0 && this.queue.queuedFor(tenant) * 2 > waiting ? priority - 1 : priority;
  }

  /**
   * With --queue-when-saturated, narrows a request's candidates to the workers with room when any
   * has (saturation.ts withRoom); undefined without it (every candidate, as before).
   */
  get roomFilter():
    | (<W extends SaturationView>(workers: readonly W[]) => readonly W[])
    | undefined {
    return this.queueWhenSaturated ? this.narrowToRoom : undefined;
  }

  private readonly narrowToRoom = <W extends SaturationView>(workers: readonly W[]): readonly W[] =>
    withRoom(workers, this.thresholds, Date.now());

  explain(ticket: AdmissionTicket, now = Date.now()): AdmissionExplanation {
    const { tenant, priority } = ticket.identity();
    const cause = this.queue.wouldWait(ticket);
    return {
      tenant,
      priority,
      would_queue: cause !== null,
      cause,
      queue_enabled: this.queue.enabled,
      queue_when_saturated: this.queueWhenSaturated,
      waiting: this.queue.waiting,
      running: this.queue.running,
      workers: ticket.candidates().map((w) => describeSaturation(w, this.thresholds, now)),
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
