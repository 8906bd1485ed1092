/**
 * One side of a prefill/decode pair on the wire: its attempt (lease, timers, cancel signal) sent
 * to its worker, and what came back, before anything reached the client. The pair's dispatch
 * (sglang-pair.ts, vllm-pair.ts) decides from two of these whether to relay, retry or answer.
 */
import type { Dispatcher } from "undici";
import { ClientAbort, ShutdownAbort } from "../proxy/abort-reasons.js";
import type { Attempt } from "../proxy/attempt.js";
import {
  type AttemptFailure,
  classifyNetworkError,
  RETRYABLE_STATUS,
  statusFailure,
} from "../proxy/upstream-failure.js";
import type { UsageTap } from "../proxy/usage-tap.js";
import { FAILED, NEUTRAL } from "../workers/lease.js";
import { BodyTooLargeError, readCappedBody } from "../workers/worker-request.js";

/** The other side of the pair failed first: this one was stopped, through no fault of its own. */
export class PartnerFailed extends Error {
  constructor() {
    super("the other side of the prefill/decode pair failed");
  }
}

/** What one side's request came to: an answer's head, or an error with the abort reason. */
export type SideResult =
  | { kind: "answer"; upstream: Dispatcher.ResponseData }
  | { kind: "error"; err: unknown; reason: unknown };

/** Sends one side's request; never rejects. */
export async function sendSide(
  attempt: Attempt,
  method: "POST" | "GET",
  path: string,
  headers: Record<string, string | string[]>,
  body: Buffer,
): Promise<SideResult> {
  const { worker, controller } = attempt;
  try {
    const upstream = await worker.pool.request({
      method,
      path: worker.basePath + path,
      headers: attempt.traced(headers),
      body,
      signal: controller,
      // 0 = off: the attempt's timers bound the wait.
      headersTimeout: 0,
      bodyTimeout: 0,
    });
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
  result.upstream.body.dump().catch(() => {});
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
  if (result?.kind === "answer") result.upstream.body.destroy();
  attempt.end(NEUTRAL);
}

/**
 * Reads a prefill answer's body to its end and discards it, so the prefill worker is not cut off
 * mid-answer (an engine aborts a request whose client left), then ends its attempt: answered, or
 * failed if the body broke on its own. Its first body byte ends the worker's pending prefill (the
 * engine sends it once the prompt is computed), whatever the decode side is doing meanwhile.
 * Bounded by the attempt's request timeout.
 */
export async function drainSide(
  attempt: Attempt,
  upstream: Dispatcher.ResponseData,
  /** Reads the prefill worker's cached-token count on the way (the request's cache account). */
  tap?: UsageTap,
): Promise<void> {
  try {
    for await (const chunk of upstream.body as AsyncIterable<Buffer>) {
      attempt.firstByte();
      tap?.write(chunk);
    }
    attempt.end({ kind: "answered", status: upstream.statusCode });
  } catch {
    const reason = attempt.controller.reason;
    // Stopped by the router (client gone, partner failed, shutdown): nothing about the worker.
    const stopped =
      reason instanceof ClientAbort ||
      reason instanceof PartnerFailed ||
      reason instanceof ShutdownAbort;
    attempt.end(stopped ? NEUTRAL : FAILED);
  }
}

/**
 * Reads a small JSON answer (a vLLM prefill's) whole, up to `maxBytes`; undefined past the limit
 * or when it does not parse.
 */
export async function readJson(
  upstream: Dispatcher.ResponseData,
  maxBytes: number,
  /** Reads the engine's usage on the way (the request's cache account). */
  tap?: UsageTap,
): Promise<unknown | undefined> {
  let body: Buffer;
  try {
    body = await readCappedBody(upstream.body, maxBytes);
  } catch (err) {
    if (err instanceof BodyTooLargeError) return undefined;
    throw err;
  }
  tap?.write(body);
  try {
    return JSON.parse(body.toString("utf8"));
  } catch {
    return undefined;
  }
}
