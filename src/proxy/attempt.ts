import type { AttemptTrace } from "../tracing/request-trace.js";
import type { DispatchLoad, LeaseOutcome, WorkerLease } from "../workers/lease.js";
import type { Worker } from "../workers/worker.js";
import { ClientAbort, FirstByteTimeout, RequestTimeout, timerMs } from "./abort-reasons.js";
import { Cancel } from "./cancel.js";
import type { IdleSweep } from "./idle-sweep.js";

/** The relay's time limits, in ms. */
export interface RelayLimits {
  /** --idle-timeout-secs: the worker's silence between two chunks (not counted under back-pressure). */
  idleTimeoutMs: number;
  /** --client-stall-secs: the client taking nothing while its socket is full; 0 = no limit. */
  clientStallMs: number;
  /** One timer for the idle limit of every open relay (the forwarder's); absent: one per relay. */
  idle?: IdleSweep;
}

/** What an attempt needs to know to start. */
export interface AttemptPlan {
  worker: Worker;
  /** What the request adds to the worker's load while it runs (workers/lease.ts). */
  load: DispatchLoad;
  requestId: string;
  /** When the request arrived (epoch ms): ttfb is measured from it. */
  startedAt: number;
  /** Epoch ms by which the whole request ends (--request-timeout-secs). */
  deadline: number;
  /**
   * How long the worker may take to send its response headers (undefined: the sender bounds it
   * itself), and whether it streams.
   */
  firstByteMs: number | undefined;
  stream: boolean;
  /** Aborted when the client goes away. */
  clientSignal: Cancel;
  /** The x-radixgate-route header: branch, match rate, and the index when not the trees. */
  route: string;
  limits: RelayLimits;
  /** Read the engine's usage from a successful answer (proxy/usage-tap.ts). */
  readUsage: boolean;
  /** Shown each chunk of a successful answer (ForwardRequest.onAnswerChunk). */
  onAnswerChunk?: ((chunk: Buffer, worker: Worker) => void) | undefined;
  /** --explain-header: its name and this request's cache account, sent with the response headers. */
  explain?: readonly [name: string, value: string] | undefined;
  onUpstreamError: (worker: Worker, kind: string) => void;
  /** This attempt's span (tracing/); undefined when tracing is off. */
  trace?: AttemptTrace | undefined;
}

/**
 * One try of one request against one worker: its lease on the worker, its cancel signal, and the
 * timers that bound it (the whole request, the first byte). Made by the forwarder, handed to
 * relay(); end() gives everything back once, whichever path gets there first.
 */
export class Attempt {
  readonly worker: Worker;
  readonly requestId: string;
  readonly startedAt: number;
  readonly route: string;
  readonly limits: RelayLimits;
  readonly readUsage: boolean;
  readonly onAnswerChunk: ((chunk: Buffer, worker: Worker) => void) | undefined;
  readonly explain: readonly [name: string, value: string] | undefined;
  readonly onUpstreamError: (worker: Worker, kind: string) => void;
  /** The router's priority the body carries to this engine (--engine-priority), undefined = none. */
  readonly enginePriority: number | undefined;
  /** Aborted, with the reason, when the attempt must stop (client gone, timeout, shutdown). */
  readonly controller = new Cancel();
  private readonly lease: WorkerLease;
  private readonly trace: AttemptTrace | undefined;
  private readonly clientSignal: Cancel;
  private readonly overall: NodeJS.Timeout;
  private readonly firstByteTimer: NodeJS.Timeout | undefined;
  private readonly onClientGone = () => this.controller.abort(new ClientAbort());

  constructor(plan: AttemptPlan) {
    this.worker = plan.worker;
    this.requestId = plan.requestId;
    this.startedAt = plan.startedAt;
    this.route = plan.route;
    this.limits = plan.limits;
    this.readUsage = plan.readUsage;
    this.onAnswerChunk = plan.onAnswerChunk;
    this.explain = plan.explain;
    this.onUpstreamError = plan.onUpstreamError;
    this.enginePriority = plan.load.enginePriority;
    this.clientSignal = plan.clientSignal;
    this.trace = plan.trace;
    plan.clientSignal.once("abort", this.onClientGone);
    this.overall = setTimeout(
      () => this.controller.abort(new RequestTimeout()),
      timerMs(plan.deadline - Date.now()),
    );
    // Native timers, not undici's headersTimeout/bodyTimeout: those run on a coarse clock that
    // fires up to a second late, so a 0.3 s first-byte timeout would really be ~1 s.
    const firstByteMs = plan.firstByteMs;
    this.firstByteTimer =
      firstByteMs === undefined
        ? undefined
        : setTimeout(
            () => this.controller.abort(new FirstByteTimeout(firstByteMs, plan.stream)),
            timerMs(firstByteMs),
          );
    this.lease = plan.worker.dispatch(plan.load);
  }

  /** The worker's response headers came: the first-byte limit no longer applies. */
  headersArrived(status?: number): void {
    clearTimeout(this.firstByteTimer);
    if (status !== undefined) this.trace?.status(status);
  }

  /** The first body byte came: the worker's prefill is over. */
  firstByte(): void {
    this.lease.firstByte();
    this.trace?.firstByte();
  }

  /** The upstream headers, with this attempt's W3C traceparent when tracing is on. */
  traced(headers: Record<string, string | string[]>): Record<string, string | string[]> {
    return this.trace === undefined ? headers : this.trace.inject(headers);
  }

  /**
   * The attempt is over: the worker's load and the outcome are recorded (once: later calls are
   * no-ops), and the timers and the client listener go.
   */
  end(outcome: LeaseOutcome): void {
    if (this.lease.done) return;
    this.lease.finish(outcome);
    this.trace?.end(outcome);
    clearTimeout(this.overall);
    clearTimeout(this.firstByteTimer);
    this.clientSignal.off("abort", this.onClientGone);
  }
}
