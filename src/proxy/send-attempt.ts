/**
 * One attempt's exchange with its worker: send the request, then either relay the answer to the
 * client or report a failure the forwarder may retry elsewhere (forward.ts). A worker's Retry-After
 * starts its cool-down here.
 */
import type { ServerResponse } from "node:http";
import { RouterError } from "../errors.js";
import { FAILED, NEUTRAL } from "../workers/lease.js";
import type { Worker } from "../workers/worker.js";
import { ClientAbort, ShutdownAbort } from "./abort-reasons.js";
import type { Attempt } from "./attempt.js";
import { retryAfterMs } from "./backoff.js";
import type { Cancel } from "./cancel.js";
import { bodyForRank, headersWithRank } from "./dp-rank.js";
import { bodyWithPriority } from "./engine-priority.js";
import type { ForwardOutcome, ForwardRequest } from "./forward-contract.js";
import { withWorkerAuth } from "./headers.js";
import { relay } from "./relay.js";
import { callUpstream, type UpstreamAnswer } from "./upstream-call.js";
import {
  type AttemptFailure,
  classifyNetworkError,
  RETRYABLE_STATUS,
  statusFailure,
} from "./upstream-failure.js";
import type { ReportedUsage } from "./usage-tap.js";
import { writeError } from "./write-error.js";

/** Either the response was (or is being) sent, or the attempt failed before any byte. */
export type AttemptResult =
  | { kind: "done"; outcome: Omit<ForwardOutcome, "attempts">; usage?: ReportedUsage }
  | { kind: "failed"; failure: AttemptFailure };

/** How an attempt's first byte is seen (AttemptSender.firstByte). */
export type FirstByteSeen = "timed" | "reported" | "unseen";

/**
 * Who carries one attempt to its worker and the answer to the client: this process
 * (NodeAttempts, the default data plane) or another that relays for it (--data-plane nginx:
 * proxy/remote-relay.ts). Chosen once when the router is assembled; the forwarder's retry loop,
 * lease and feedback are the same for both. Whatever happens, the attempt is ended and its
 * controller leaves `inProgress` by the time the promise settles.
 */
export interface AttemptSender {
  /**
   * Who sees the first byte of the attempt answering `res`: `timed` here (the forwarder's
   * first-byte timer runs, and a stream's prefill is seen to end); `reported` (the sender bounds
   * it and says when it came: a replica relaying for the leader); `unseen` (the sender bounds it,
   * nginx's read timeout, and the end is all that is seen: one timer fewer per request).
   * Absent: timed.
   */
  firstByte?(res: ServerResponse): FirstByteSeen;
  send(
    attempt: Attempt,
    req: ForwardRequest,
    headers: Record<string, string | string[]>,
    /** The data-parallel rank the request goes to, when the router chose one. */
    rank: number | undefined,
    res: ServerResponse,
    /** Whether a retryable answer may be discarded for another worker (not on the last try). */
    canRetry: () => boolean,
    /** The forwarder's abortAll() ran: the attempt ends at once. */
    closed: boolean,
    /** The forwarder's upstream requests under way: this one leaves it when it ends. */
    inProgress: Set<Cancel>,
  ): Promise<AttemptResult>;
}

/**
 * The Node.js data plane: this process calls the worker and relays its answer (relay.ts), or
 * reports why the attempt failed. One async frame per attempt: the forwarder returns its promise
 * as is.
 */
export class NodeAttempts implements AttemptSender {
  constructor(
    /** --max-cool-down-secs in ms (0 = ignore Retry-After). */
    private readonly maxCoolDownMs: number,
  ) {}

  async send(
    attempt: Attempt,
    req: ForwardRequest,
    headers: Record<string, string | string[]>,
    rank: number | undefined,
    res: ServerResponse,
    canRetry: () => boolean,
    closed: boolean,
    inProgress: Set<Cancel>,
  ): Promise<AttemptResult> {
    const { worker, controller } = attempt;
    try {
      if (closed) controller.abort(new ShutdownAbort());
      let upstream: UpstreamAnswer;
      try {
        upstream = await callUpstream(
          worker.pool,
          {
            method: req.method,
            path: worker.basePath + req.path,
            headers: withWorkerAuth(
              headersWithRank(attempt.traced(headers), rank),
              worker.authorization,
            ),
            body:
              bodyWithPriority(
                bodyForRank(req.routing.body, req.path, worker.engine, rank),
                worker.engine,
                attempt.enginePriority,
              ) ?? null,
            // 0 = off: the attempt's timers and relay()'s bound the wait instead.
            headersTimeout: 0,
            bodyTimeout: 0,
          },
          controller,
        );
      } catch (err) {
        const reason = controller.reason;
        if (reason instanceof ClientAbort) {
          attempt.end(NEUTRAL);
          return { kind: "done", outcome: { status: 499, worker, error: "client_abort" } };
        }
        if (reason instanceof ShutdownAbort) {
          attempt.end(NEUTRAL);
          const error = new RouterError(
            "shutting_down",
            "The router is shutting down and its --shutdown-grace-secs ran out; retry the request.",
          );
          writeError(res, error, req.requestId);
          return { kind: "done", outcome: { status: error.status, worker, error: "shutdown" } };
        }
        // Connection failures and timeouts (first byte included) count against the breaker like a
        // 5xx: a worker that accepts requests and never answers is ejected after
        // --cb-failure-threshold of them, although its /health may still say 200.
        attempt.end(FAILED);
        return { kind: "failed", failure: classifyNetworkError(err, reason, worker) };
      }

      const status = upstream.statusCode;
      attempt.headersArrived(status);
      coolDown(worker, this.maxCoolDownMs, status, upstream.headers["retry-after"]);
      if (RETRYABLE_STATUS.has(status) && canRetry()) {
        // Nothing reached the client yet: discard this answer and let the caller try another worker.
        upstream.dump();
        // 429 says "busy", not "broken": neutral for the breaker.
        attempt.end(status === 429 ? NEUTRAL : FAILED);
        return { kind: "failed", failure: statusFailure(status, worker) };
      }

      const { outcome, usage } = await relay(upstream, attempt, res);
      return { kind: "done", outcome, usage };
    } finally {
      // Every path above ended the attempt; this only makes sure (a second end is a no-op).
      attempt.end(NEUTRAL);
      inProgress.delete(controller);
    }
  }
}

/**
 * A 429/503 with Retry-After: the worker gets no new requests until then (capped by
 * --max-cool-down-secs). Other workers are not held back.
 */
function coolDown(
  worker: Worker,
  maxCoolDownMs: number,
  status: number,
  header: string | string[] | undefined,
): void {
  if ((status !== 429 && status !== 503) || maxCoolDownMs <= 0) return;
  const ms = retryAfterMs(header);
  if (ms === undefined || ms <= 0) return;
  const until = Date.now() + Math.min(ms, maxCoolDownMs);
  worker.coolDown(until);
}
