import type { ServerResponse } from "node:http";
import type { Dispatcher } from "undici";
import { type ErrorCode, errorBody } from "../errors.js";
import { FAILED, type LeaseOutcome, NEUTRAL } from "../workers/lease.js";
import type { Worker } from "../workers/worker.js";
import {
  ClientAbort,
  ClientStall,
  IdleTimeout,
  RequestTimeout,
  ShutdownAbort,
  timerMs,
} from "./abort-reasons.js";
import type { Attempt } from "./attempt.js";
import { responseHeaders } from "./headers.js";
import { StallWatch } from "./stall-watch.js";
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
 * resolves.
 */
export function relay(
  upstream: Dispatcher.ResponseData,
  attempt: Attempt,
  res: ServerResponse,
): Promise<RelayResult> {
  const { worker, controller, limits } = attempt;
  const tap = attempt.readUsage ? usageTapFor(upstream) : undefined;
  const status = upstream.statusCode;
  const contentType = String(upstream.headers["content-type"] ?? "");
  const isEventStream = contentType.startsWith("text/event-stream");
  const headers = responseHeaders(upstream.headers, worker.id, attempt.route, attempt.requestId);
  if (attempt.explain !== undefined) headers[attempt.explain[0]] = attempt.explain[1];
  res.writeHead(status, headers);

  return new Promise((resolve) => {
    const body = upstream.body;
    let ttfbMs: number | undefined;
    let settled = false;
    // The headers leave with the first body chunk: one write to the client instead of two (the
    // worker's first chunk usually came in the same read as its headers). A stream whose first
    // event is not here yet gets its headers now, as the engine sent them: the client sees the
    // 200 while prefill runs.
    if (isEventStream) {
      setImmediate(() => {
        if (ttfbMs === undefined && !settled && !res.destroyed) res.flushHeaders();
      });
    }
    const idle = setTimeout(() => {
      // Silence caused by a client that does not read is not the worker's: wait for it.
      if (res.writableNeedDrain) idle.refresh();
      else controller.abort(new IdleTimeout());
    }, timerMs(limits.idleTimeoutMs));
    const stall = new StallWatch(res, limits.clientStallMs, () => {
      // The idle timer waits for such a client; this limit does not, so a client that stopped
      // reading does not hold an upstream slot (and the bytes queued for it) until
      // --request-timeout-secs. Nothing more can reach it: cut its connection.
      controller.abort(new ClientStall());
      finish(NEUTRAL, {
        status: 499,
        upstreamStatus: status,
        worker,
        error: "client_stall",
        ...(ttfbMs !== undefined ? { ttfbMs } : {}),
      });
      body.destroy();
      res.destroy();
    });
    const finish = (lease: LeaseOutcome, outcome: RelayOutcome) => {
      if (settled) return;
      settled = true;
      clearTimeout(idle);
      stall.stop();
      res.off("close", onClientClose);
      attempt.end(lease);
      resolve({ outcome, usage: tap?.result() });
    };
    const onClientClose = () => {
      if (res.writableFinished) return;
      // The client left mid-response: stop the worker's work too; not the worker's fault.
      controller.abort(new ClientAbort());
      body.destroy();
      // Logged and counted as 499 whatever the worker's status was: the client did not get it.
      finish(NEUTRAL, {
        status: 499,
        upstreamStatus: status,
        worker,
        error: "client_abort",
        ...(ttfbMs !== undefined ? { ttfbMs } : {}),
      });
    };
    res.on("close", onClientClose);
    // One listener does everything a chunk needs (rather than pipe() plus one listener per
    // concern): note the first byte, show it to the tap, restart the idle timer, write it on,
    // and pause the worker's body while the client's socket is full.
    const resume = () => {
      stall.stop();
      body.resume();
    };
    body.on("data", (chunk: Buffer) => {
      if (ttfbMs === undefined) {
        ttfbMs = Date.now() - attempt.startedAt;
        attempt.firstByte();
      }
      tap?.write(chunk);
      idle.refresh();
      if (!res.write(chunk)) {
        body.pause();
        res.once("drain", resume);
        stall.start();
      }
    });
    body.on("end", () => {
      res.end();
      // Served; the breaker counts a 5xx as a failure and a 4xx as neutral (the request was bad,
      // not the worker), so a 4xx neither opens a closed breaker nor closes a half-open one.
      if (status >= 500) attempt.onUpstreamError(worker, `status_${status}`);
      finish(
        { kind: "answered", status },
        { status, worker, ...(ttfbMs !== undefined ? { ttfbMs } : {}) },
      );
    });
    body.on("error", (err) => {
      const reason = controller.reason;
      if (reason instanceof ClientAbort || reason instanceof ClientStall) return;
      if (reason instanceof ShutdownAbort) {
        // Not the worker's fault: no breaker count. A stream learns why it ends, in-band.
        endBroken(
          "shutting_down",
          "The router is shutting down and its --shutdown-grace-secs ran out; retry the request.",
        );
        finish(NEUTRAL, {
          status,
          worker,
          error: "shutdown",
          ...(ttfbMs !== undefined ? { ttfbMs } : {}),
        });
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
      endBroken(timedOut ? "upstream_timeout" : "upstream_error", message);
      finish(FAILED, { status, worker, error: kind, ...(ttfbMs !== undefined ? { ttfbMs } : {}) });
    });
    /** Ends a response whose upstream broke: an SSE error event, or a cut for a JSON body. */
    const endBroken = (code: ErrorCode, message: string) => {
      if (isEventStream && !res.destroyed) {
        // Tell a streaming client in-band that the stream broke, then close it cleanly.
        res.end(`data: ${JSON.stringify(errorBody(code, message))}\n\n`);
      } else {
        // A truncated JSON body must not look complete: cut the connection.
        res.destroy();
      }
    };
  });
}

/**
 * A tap for a successful answer's body, which relay() shows every chunk as it goes by (never
 * holding one back); none for a compressed body, which the tap cannot read.
 */
function usageTapFor(upstream: Dispatcher.ResponseData): UsageTap | undefined {
  if (upstream.statusCode < 200 || upstream.statusCode >= 300) return;
  const encoding = upstream.headers["content-encoding"];
  if (encoding !== undefined && encoding !== "identity") return;
  return new UsageTap();
}
