/**
 * One side of a prefill/decode pair on the wire: its attempt (lease, timers, cancel signal) sent
 * to its worker, and what came back, before anything reached the client. The pair's dispatch
 * (sglang-pair.ts, vllm-pair.ts) decides from two of these whether to relay, retry or answer.
 */
import { ClientAbort, ShutdownAbort } from "../proxy/abort-reasons.js";
import type { Attempt } from "../proxy/attempt.js";
import { callUpstream, type UpstreamAnswer } from "../proxy/upstream-call.js";
import {
  type AttemptFailure,
  classifyNetworkError,
  RETRYABLE_STATUS,
  statusFailure,
} from "../proxy/upstream-failure.js";
import type { UsageTap } from "../proxy/usage-tap.js";
import { FAILED, NEUTRAL } from "../workers/lease.js";

/** The other side of the pair failed first: this one was stopped, through no fault of its own. */
export class PartnerFailed extends Error {
  constructor() {
    super("the other side of the prefill/decode pair failed");
  }
}

/** What one side's request came to: an answer's head, or an error with the abort reason. */
export type SideResult =
  | { kind: "answer"; upstream: UpstreamAnswer }
  | { kind: "error"; err: unknown; reason: unknown };

/**
 * Sends one side's request through the proxy's upstream call (proxy/upstream-call.ts), as every
 * other request to a worker goes; never rejects.
 */
export async function sendSide(
  attempt: Attempt,
  method: "POST" | "GET",
  path: string,
  headers: Record<string, string | string[]>,
  body: Buffer,
): Promise<SideResult> {
  const { worker, controller } = attempt;
  try {
    const upstream = await callUpstream(
      worker.pool,
      {
        method,
        path: worker.basePath + path,
        headers: attempt.traced(headers),
        body,
        // 0 = off: the attempt's timers bound the wait.
        headersTimeout: 0,
        bodyTimeout: 0,
      },
      controller,
    );
    attempt.headersArrived(upstream.statusCode);
    return { kind: "answer", upstream };
  } catch (err) {
    return { kind: "error", err, reason: controller.reason };
  }
}

/** Whether the side answered 2xx. */
export function answered2xx(result: SideResult): boolean {
  return (
    result.kind === "answer" &&
    result.upstream.statusCode >= 200 &&
    result.upstream.statusCode < 300
  );
}

/** Why the router stopped a side (client gone, shutdown, the partner), if it did. */
export function stopReason(result: SideResult): "client" | "shutdown" | "partner" | undefined {
  if (result.kind !== "error") return undefined;
  if (result.reason instanceof ClientAbort) return "client";
  if (result.reason instanceof ShutdownAbort) return "shutdown";
  if (result.reason instanceof PartnerFailed) return "partner";
  return undefined;
}

/**
 * A side that failed on its own before the client saw anything: what it says about the worker
 * (its breaker), and the failure to retry on or report. An answer is discarded.
 */
export function sideFailure(attempt: Attempt, result: SideResult): AttemptFailure {
  if (result.kind === "error") {
    attempt.end(FAILED);
    return classifyNetworkError(result.err, result.reason, attempt.worker);
  }
  const status = result.upstream.statusCode;
  result.upstream.dump();
  // 429 says "busy", not "broken": neutral for the breaker.
  attempt.end(status === 429 ? NEUTRAL : FAILED);
  return statusFailure(status, attempt.worker);
}

/** Whether a failed side's answer is one another pair may do better with (a 5xx/429 of RETRYABLE_STATUS). */
export function retryableAnswer(result: SideResult): boolean {
  return result.kind === "answer" && RETRYABLE_STATUS.has(result.upstream.statusCode);
}

/** Stops a side that is not needed any more (the other failed, or the client left). */
export function dropSide(attempt: Attempt, result: SideResult | undefined): void {
  if (!attempt.controller.aborted) attempt.controller.abort(new PartnerFailed());
  if (result?.kind === "answer") result.upstream.cut();
  attempt.end(NEUTRAL);
}

/**
 * Reads a prefill answer's body to its end and discards it, so the prefill worker is not cut off
 * mid-answer (an engine aborts a request whose client left), then ends its attempt: answered, or
 * failed if the body broke on its own. Its first body byte ends the worker's pending prefill (the
 * engine sends it once the prompt is computed), whatever the decode side is doing meanwhile.
 * Bounded by the attempt's request timeout; never rejects.
 */
export function drainSide(
  attempt: Attempt,
  upstream: UpstreamAnswer,
  /** Reads the prefill worker's cached-token count on the way (the request's cache account). */
  tap?: UsageTap,
): Promise<void> {
  return new Promise((resolve) => {
    upstream.pipeTo({
      onData(chunk) {
        attempt.firstByte();
        tap?.write(chunk);
      },
      onEnd() {
        attempt.end({ kind: "answered", status: upstream.statusCode });
        resolve();
      },
      onError() {
        const reason = attempt.controller.reason;
        // Stopped by the router (client gone, partner failed, shutdown): nothing about the worker.
        const stopped =
          reason instanceof ClientAbort ||
          reason instanceof PartnerFailed ||
          reason instanceof ShutdownAbort;
        attempt.end(stopped ? NEUTRAL : FAILED);
        resolve();
      },
    });
  });
}

/**
 * Reads a small JSON answer (a vLLM prefill's) whole, up to `maxBytes` (past it the answer is cut
 * and the rest never read); undefined past the limit or when it does not parse. Rejects when the
 * answer breaks off.
 */
export async function readJson(
  upstream: UpstreamAnswer,
  maxBytes: number,
  /** Reads the engine's usage on the way (the request's cache account). */
  tap?: UsageTap,
): Promise<unknown | undefined> {
  const body = await readCapped(upstream, maxBytes);
  if (body === undefined) return undefined;
  tap?.write(body);
  try {
    return JSON.parse(body.toString("utf8"));
  } catch {
    return undefined;
  }
}

/** An answer's whole body, or undefined past `maxBytes` (then cut at once: bounded memory). */
function readCapped(upstream: UpstreamAnswer, maxBytes: number): Promise<Buffer | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let over = false;
    upstream.pipeTo({
      onData(chunk) {
        if (over) return;
        size += chunk.length;
        if (size <= maxBytes) {
          chunks.push(chunk);
          return;
        }
        over = true;
        chunks.length = 0;
        upstream.cut();
        resolve(undefined);
      },
      onEnd: () => resolve(Buffer.concat(chunks)),
      onError: (err) => (over ? undefined : reject(err)),
    });
  });
}
