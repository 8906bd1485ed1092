import { errors as undiciErrors } from "undici";
import type { ErrorCode } from "../errors.js";
import type { Worker } from "../workers/worker.js";
import { FirstByteTimeout, RequestTimeout } from "./abort-reasons.js";

/** Statuses after which another worker may succeed and nothing reached the client yet. */
export const RETRYABLE_STATUS = new Set([429, 502, 503, 504]);
/** Network failures where the worker never got the request (down, unreachable). */
const CONNECT_FAILURES = new Set([
  "ECONNREFUSED",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "UND_ERR_CONNECT_TIMEOUT",
  // workers/guarded-lookup.ts: the name resolved to a link-local address; nothing was sent.
  "ERR_LINK_LOCAL_REFUSED",
]);
/**
 * The connection was lost before any response (worker killed or restarted mid-request). The
 * worker may have started, but nothing reached the client and a lost connection aborts the work
 * on the engine, so another worker may take the request.
 */
const RESET_FAILURES = new Set(["ECONNRESET", "EPIPE", "UND_ERR_SOCKET"]);

export type AttemptFailure = { kind: string; retryable: boolean; code: ErrorCode; message: string };

/** What an attempt that got no response says about the worker, and whether another may be tried. */
export function classifyNetworkError(
  err: unknown,
  reason: unknown,
  worker: Worker,
): AttemptFailure {
  if (reason instanceof RequestTimeout) {
    return {
      kind: "timeout",
      retryable: false,
      code: "upstream_timeout",
      message: `Request to worker ${worker.url} exceeded --request-timeout-secs.`,
    };
  }
  if (reason instanceof FirstByteTimeout) {
    return {
      kind: "timeout",
      // Engines send a stream's headers before any prefill, so a silent stream means a stuck
      // worker, not a long prompt: another worker may serve it. A non-streaming request may still
      // be generating; trying it again elsewhere would double its wait.
      retryable: reason.stream,
      code: "upstream_timeout",
      message: `Worker ${worker.url} sent no response within ${reason.flag} (${reason.limitMs / 1000} s).`,
    };
  }
  if (err instanceof undiciErrors.ConnectTimeoutError) {
    return {
      kind: "connect_timeout",
      retryable: true,
      code: "upstream_timeout",
      message: `Connecting to worker ${worker.url} timed out.`,
    };
  }
  const code = (err as { code?: string }).code ?? "";
  const causeCode = (err as { cause?: { code?: string } }).cause?.code ?? "";
  const has = (set: Set<string>) => set.has(code) || set.has(causeCode);
  const kind = has(CONNECT_FAILURES) ? "connect" : has(RESET_FAILURES) ? "reset" : "network";
  return {
    kind,
    retryable: kind !== "network",
    code: "upstream_error",
    message: `Worker ${worker.url} failed: ${(err as Error).message ?? String(err)}.`,
  };
}

/** A retryable status answered by a worker (429, 502, 503, 504), as a failed attempt. */
export function statusFailure(status: number, worker: Worker): AttemptFailure {
  const code: ErrorCode =
    status === 504 ? "upstream_timeout" : status === 429 ? "too_many_requests" : "upstream_error";
  return {
    kind: `status_${status}`,
    retryable: true,
    code,
    message: `Worker ${worker.url} answered ${status}.`,
  };
}
