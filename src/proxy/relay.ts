import type { ServerResponse } from "node:http";
import type { Dispatcher } from "undici";
import { type ErrorCode, errorBody } from "../errors.js";
import type { Worker } from "../workers/worker.js";
import {
  ClientAbort,
  ClientStall,
  IdleTimeout,
  RequestTimeout,
  ShutdownAbort,
  timerMs,
} from "./abort-reasons.js";
import type { Cancel } from "./cancel.js";
import { responseHeaders } from "./headers.js";
import { StallWatch } from "./stall-watch.js";
import type { UsageTap } from "./usage-tap.js";

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

/** The relay's time limits, in ms. */
export interface RelayLimits {
  /** --idle-timeout-secs: the worker's silence between two chunks (not counted under back-pressure). */
  idleTimeoutMs: number;
  /** --client-stall-secs: the client taking nothing while its socket is full; 0 = no limit. */
  clientStallMs: number;
}

/** Streams the worker's answer to the client as it arrives, honouring back-pressure. */
export function relay(
  upstream: Dispatcher.ResponseData,
  worker: Worker,
  req: { readonly requestId: string; readonly startedAt: number },
  res: ServerResponse,
  controller: Cancel,
  route: string,
  limits: RelayLimits,
  onUpstreamError: (worker: Worker, kind: string) => void,
  /** Called with the first body chunk (prefill is over), before it is written. */
  onFirstChunk: () => void,
  /** Reads the engine's usage from each chunk as it passes (usage-tap.ts). */
  tap: UsageTap | undefined,
): Promise<RelayOutcome> {
  const status = upstream.statusCode;
  const contentType = String(upstream.headers["content-type"] ?? "");
  const isEventStream = contentType.startsWith("text/event-stream");
  res.writeHead(status, responseHeaders(upstream.headers, worker.id, route, req.requestId));

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
      worker.breaker.onNeutral();
      finish({
        status: 499,
        upstreamStatus: status,
        worker,
        error: "client_stall",
        ...(ttfbMs !== undefined ? { ttfbMs } : {}),
      });
      body.destroy();
      res.destroy();
    });
    const finish = (outcome: RelayOutcome) => {
      if (settled) return;
      settled = true;
      clearTimeout(idle);
      stall.stop();
      res.off("close", onClientClose);
      resolve(outcome);
    };
    const onClientClose = () => {
      if (res.writableFinished) return;
      // The client left mid-response: stop the worker's work too; not the worker's fault.
      controller.abort(new ClientAbort());
      body.destroy();
      worker.breaker.onNeutral();
      // Logged and counted as 499 whatever the worker's status was: the client did not get it.
      finish({
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
        ttfbMs = Date.now() - req.startedAt;
        onFirstChunk();
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
      worker.served += 1;
      if (status >= 500) {
        worker.breaker.onFailure();
        onUpstreamError(worker, `status_${status}`);
      } else if (status >= 400) {
        // A 4xx says the request was bad, not the worker: neutral, so it neither opens a closed
        // breaker nor closes a half-open one.
        worker.breaker.onNeutral();
      } else worker.breaker.onSuccess();
      finish({ status, worker, ...(ttfbMs !== undefined ? { ttfbMs } : {}) });
    });
    body.on("error", (err) => {
      const reason = controller.reason;
      if (reason instanceof ClientAbort || reason instanceof ClientStall) return;
      if (reason instanceof ShutdownAbort) {
        // Not the worker's fault: no breaker count. A stream learns why it ends, in-band.
        worker.breaker.onNeutral();
        endBroken(
          "shutting_down",
          "The router is shutting down and its --shutdown-grace-secs ran out; retry the request.",
        );
        finish({ status, worker, error: "shutdown", ...(ttfbMs !== undefined ? { ttfbMs } : {}) });
        return;
      }
      const timedOut = reason instanceof RequestTimeout || reason instanceof IdleTimeout;
      const kind = timedOut ? "timeout" : "stream";
      worker.breaker.onFailure();
      onUpstreamError(worker, kind);
      const message =
        reason instanceof IdleTimeout
          ? `Worker ${worker.url} sent nothing for --idle-timeout-secs.`
          : reason instanceof RequestTimeout
            ? `Request to worker ${worker.url} exceeded --request-timeout-secs.`
            : `Worker ${worker.url} failed mid-stream: ${err.message}`;
      endBroken(timedOut ? "upstream_timeout" : "upstream_error", message);
      finish({ status, worker, error: kind, ...(ttfbMs !== undefined ? { ttfbMs } : {}) });
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
