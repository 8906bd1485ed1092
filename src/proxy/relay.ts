import type { ServerResponse } from "node:http";
import { type ErrorCode, errorBody } from "../errors.js";
import { FAILED, type LeaseOutcome, NEUTRAL } from "../workers/lease.js";
import type { Worker } from "../workers/worker.js";
import {
  ClientAbort,
  ClientStall,
  IdleTimeout,
  RequestTimeout,
  ShutdownAbort,
} from "./abort-reasons.js";
import type { Attempt } from "./attempt.js";
import { responseHeaders } from "./headers.js";
import { type IdleEntry, IdleSweep } from "./idle-sweep.js";
import { StallWatch } from "./stall-watch.js";
import type { BodySink, UpstreamAnswer } from "./upstream-call.js";
import { type ReportedUsage, UsageTap } from "./usage-tap.js";

/** How a relayed response ended, for the access log and metrics. */
export interface RelayOutcome {
  status: number;
  worker: Worker;
  /** ms from arrival to the first body byte sent to the client. */
  ttfbMs?: number;
  /** client_abort, client_stall, stream, timeout; absent when the response ended normally. */
  error?: string;
  /** The worker's own status when it differs from `status` (a client gone mid-stream: 499). */
  upstreamStatus?: number;
}

/**
 * The outcome and the engine's usage side by side, not merged: the forwarder hands them on
 * separately, and copying the outcome into a new object (and out again) cost every request.
 */
export interface RelayResult {
  outcome: RelayOutcome;
  /** The engine's usage, read from a successful answer as it went by (usage-tap.ts). */
  usage: ReportedUsage | undefined;
}

/**
 * Streams the worker's answer to the client as it arrives, honouring back-pressure. Ends the
 * attempt (its lease: load given back, the outcome to the breaker) on every path before it
 * resolves. The attempt's limits carry the IdleSweep that keeps --idle-timeout-secs for every open
 * relay with one timer (a relay without one gets a sweep of its own).
 */
export function relay(
  answer: UpstreamAnswer,
  attempt: Attempt,
  res: ServerResponse,
): Promise<RelayResult> {
  const idle = attempt.limits.idle ?? new IdleSweep(attempt.limits.idleTimeoutMs);
  return new Promise((resolve) => new Relay(answer, attempt, res, idle, resolve).start());
}

/**
 * One relayed answer, as one object: the chunk path (onData) is a method call from undici's parser
 * with no stream, closure or timer of its own in between, and an open stream holds only this
 * object's fields (issue 23: CPU per chunk, memory per open stream).
 */
class Relay implements BodySink, IdleEntry {
  /** IdleEntry: set on every chunk; the sweep clears it. */
  stirred = false;
  quietSince = 0;
  private ttfbMs: number | undefined;
  private settled = false;
  /** Made the first time the client's socket is full: most streams never need one. */
  private stall: StallWatch | undefined;
  private readonly tap: UsageTap | undefined;
  /** The request's own look at a successful answer (ForwardRequest.onAnswerChunk). */
  private readonly watch: ((chunk: Buffer, worker: Worker) => void) | undefined;
  private readonly status: number;
  private readonly isEventStream: boolean;
  private readonly onClientClose = () => this.clientClosed();
  private readonly onDrain = () => {
    this.stall?.stop();
    this.upstream.resume();
  };

  constructor(
    private readonly upstream: UpstreamAnswer,
    private readonly attempt: Attempt,
    private readonly res: ServerResponse,
    private readonly idle: IdleSweep,
    private readonly resolve: (result: RelayResult) => void,
  ) {
    this.tap = attempt.readUsage ? usageTapFor(upstream) : undefined;
    this.status = upstream.statusCode;
    this.watch = this.status >= 200 && this.status < 300 ? attempt.onAnswerChunk : undefined;
    const contentType = upstream.headers["content-type"];
    this.isEventStream =
      typeof contentType === "string" && contentType.startsWith("text/event-stream");
  }

  start(): void {
    const { res, attempt } = this;
    const headers = responseHeaders(
      this.upstream.headers,
      attempt.worker.id,
      attempt.route,
      attempt.requestId,
    );
    if (attempt.explain !== undefined) headers[attempt.explain[0]] = attempt.explain[1];
    res.writeHead(this.status, headers);
    // The headers leave with the first body chunk: one write to the client instead of two (the
    // worker's first chunk usually came in the same read as its headers). A stream whose first
    // event is not here yet gets its headers now, as the engine sent them: the client sees the
    // 200 while prefill runs.
    if (this.isEventStream) setImmediate(flushHeadersIfQuiet, this);
    this.idle.add(this);
    res.on("close", this.onClientClose);
    this.upstream.pipeTo(this);
  }

  /** Sends the headers alone when no chunk came in the turn they arrived. */
  flushIfQuiet(): void {
    if (this.ttfbMs === undefined && !this.settled && !this.res.destroyed) this.res.flushHeaders();
  }

  /**
   * One chunk: note the first byte, show it to the tap, mark the stream alive, write it on, and
   * pause the worker's body while the client's socket is full. Several writes of one turn leave
   * in one writev already: node:http corks the socket on a turn's first write.
   */
  onData(chunk: Buffer): void {
    if (this.ttfbMs === undefined) {
      this.ttfbMs = Date.now() - this.attempt.startedAt;
      this.attempt.firstByte();
    }
    this.tap?.write(chunk);
    this.watch?.(chunk, this.attempt.worker);
    this.stirred = true;
    if (!this.res.write(chunk)) {
      this.upstream.pause();
      this.res.once("drain", this.onDrain);
      this.stallWatch().start();
    }
  }

  onEnd(): void {
    const { status, attempt } = this;
    this.res.end();
    // Served; the breaker counts a 5xx as a failure and a 4xx as neutral (the request was bad,
    // not the worker), so a 4xx neither opens a closed breaker nor closes a half-open one.
    if (status >= 500) attempt.onUpstreamError(attempt.worker, `status_${status}`);
    this.finish({ kind: "answered", status }, this.outcome(status));
  }

  onError(err: Error): void {
    const { attempt } = this;
    const { worker } = attempt;
    const reason = attempt.controller.reason;
    if (reason instanceof ClientAbort || reason instanceof ClientStall) return;
    if (reason instanceof ShutdownAbort) {
      // Not the worker's fault: no breaker count. A stream learns why it ends, in-band.
      this.endBroken(
        "shutting_down",
        "The router is shutting down and its --shutdown-grace-secs ran out; retry the request.",
      );
      this.finish(NEUTRAL, this.outcome(this.status, "shutdown"));
      return;
    }
    const timedOut = reason instanceof RequestTimeout || reason instanceof IdleTimeout;
    const kind = timedOut ? "timeout" : "stream";
    attempt.onUpstreamError(worker, kind);
    const message =
      reason instanceof IdleTimeout
        ? `Worker ${worker.url} sent nothing for --idle-timeout-secs.`
        : reason instanceof RequestTimeout
          ? `Request to worker ${worker.url} exceeded --request-timeout-secs.`
          : `Worker ${worker.url} failed mid-stream: ${err.message}`;
    this.endBroken(timedOut ? "upstream_timeout" : "upstream_error", message);
    this.finish(FAILED, this.outcome(this.status, kind));
  }

  /** IdleEntry: the worker sent nothing for the limit. */
  onIdle(): boolean {
    // Silence caused by a client that does not read is not the worker's: wait for it.
    if (this.res.writableNeedDrain) return false;
    this.attempt.controller.abort(new IdleTimeout());
    return true;
  }

  private stallWatch(): StallWatch {
    this.stall ??= new StallWatch(this.res, this.attempt.limits.clientStallMs, () => {
      // The idle limit waits for such a client; this one does not, so a client that stopped
      // reading does not hold an upstream slot (and the bytes queued for it) until
      // --request-timeout-secs. Nothing more can reach it: cut its connection.
      this.attempt.controller.abort(new ClientStall());
      this.finish(NEUTRAL, this.gone("client_stall"));
      this.res.destroy();
    });
    return this.stall;
  }

  private clientClosed(): void {
    if (this.res.writableFinished) return;
    // The client left mid-response: stop the worker's work too; not the worker's fault. The abort
    // ends the upstream request (upstream-call.ts), which stops its body.
    this.attempt.controller.abort(new ClientAbort());
    this.finish(NEUTRAL, this.gone("client_abort"));
  }

  /** Logged and counted as 499 whatever the worker's status was: the client did not get it. */
  private gone(error: string): RelayOutcome {
    const outcome: RelayOutcome = {
      status: 499,
      upstreamStatus: this.status,
      worker: this.attempt.worker,
      error,
    };
    if (this.ttfbMs !== undefined) outcome.ttfbMs = this.ttfbMs;
    return outcome;
  }

  private outcome(status: number, error?: string): RelayOutcome {
    const outcome: RelayOutcome = { status, worker: this.attempt.worker };
    if (this.ttfbMs !== undefined) outcome.ttfbMs = this.ttfbMs;
    if (error !== undefined) outcome.error = error;
    return outcome;
  }

  private finish(lease: LeaseOutcome, outcome: RelayOutcome): void {
    if (this.settled) return;
    this.settled = true;
    this.idle.delete(this);
    this.stall?.stop();
    this.res.off("close", this.onClientClose);
    this.attempt.end(lease);
    this.resolve({ outcome, usage: this.tap?.result() });
  }

  /** Ends a response whose upstream broke: an SSE error event, or a cut for a JSON body. */
  private endBroken(code: ErrorCode, message: string): void {
    if (this.isEventStream && !this.res.destroyed) {
      // Tell a streaming client in-band that the stream broke, then close it cleanly.
      this.res.end(`data: ${JSON.stringify(errorBody(code, message))}\n\n`);
    } else {
      // A truncated JSON body must not look complete: cut the connection.
      this.res.destroy();
    }
  }
}

function flushHeadersIfQuiet(relay: Relay): void {
  relay.flushIfQuiet();
}

/**
 * A tap for a successful answer's body, which relay() shows every chunk as it goes by (never
 * holding one back); none for a compressed body, which the tap cannot read.
 */
function usageTapFor(upstream: UpstreamAnswer): UsageTap | undefined {
  if (upstream.statusCode < 200 || upstream.statusCode >= 300) return;
  const encoding = upstream.headers["content-encoding"];
  if (encoding !== undefined && encoding !== "identity") return;
  return new UsageTap();
}
