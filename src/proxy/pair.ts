/**
 * One try of a prefill/decode pair: its two sides on the wire and how a failure before the client
 * saw anything becomes an answer or a retry of the forwarder's loop (forward.ts). The engines'
 * protocols (disaggregation/: SGLang's both-at-once, vLLM's prefill-then-decode) are written over
 * these pieces and handed to the Forwarder as a PairProtocol. The rule of the pair: if either
 * side fails before the first byte reached the client, the pair is tried again (when the failure
 * is one another worker may not repeat); once the decode side's answer has begun, never. Each
 * side's breaker hears only about its own worker.
 */
import type { ServerResponse } from "node:http";
import { RouterError } from "../errors.js";
import { FAILED, NEUTRAL } from "../workers/lease.js";
import type { Worker } from "../workers/worker.js";
import { ClientAbort, ShutdownAbort } from "./abort-reasons.js";
import type { Attempt } from "./attempt.js";
import { bodyWithPriority } from "./engine-priority.js";
import type { ForwardOutcome, ForwardRequest } from "./forward-contract.js";
import { relay } from "./relay.js";
import type { PairView } from "./routing-request.js";
import { callUpstream, type UpstreamAnswer } from "./upstream-call.js";
import {
  type AttemptFailure,
  classifyNetworkError,
  RETRYABLE_STATUS,
  statusFailure,
} from "./upstream-failure.js";
import type { ReportedUsage, UsageTap } from "./usage-tap.js";
import { writeError } from "./write-error.js";

export type Side = "prefill" | "decode";

/** A request body's JSON object. */
export type JsonObject = Record<string, unknown>;

export type { PairView };

/**
 * An engine's prefill/decode protocol (disaggregation/): one try of the pair, with the body
 * rewrites of the hand-off. The Forwarder picks the pair, retries and accounts; this sends.
 */
export interface PairProtocol {
  readonly name: "sglang" | "vllm";
  /** One try of the pair: both sides sent, the decode side's answer relayed or a failure reported. */
  exchange(t: PairTry): Promise<PairResult>;
  /** Whether the prefill side streams when the client asked for a stream (vLLM's is asked for one token). */
  readonly prefillStreams: boolean;
}

/** What a pair's exchange gets from the forwarder for one try. */
export interface PairTry {
  readonly req: ForwardRequest;
  readonly res: ServerResponse;
  /** What the pair needs of the body, from intake's one parse. */
  readonly view: PairView;
  /** The body as the client sent it (the hand-off fields are spliced into it). */
  readonly bytes: Buffer;
  readonly prefill: Worker;
  readonly decode: Worker;
  /** The upstream headers for a worker (its own key, the Via marker). */
  headersFor(worker: Worker): Record<string, string | string[]>;
  /** Starts one side's attempt: its lease on the worker, its timers. */
  open(worker: Worker, side: Side): Attempt;
  /** Whether another pair may still be tried after this one failed on `side`. */
  canRetry(side: Side): boolean;
  /** Runs a side's background work (a prefill answer read to its end) under the shutdown watch. */
  track(attempt: Attempt, work: Promise<unknown>): void;
}

export type PairResult =
  | {
      kind: "done";
      /** Its `usage` is the decode side's: the whole request's tokens (what a quota charges). */
      outcome: Omit<ForwardOutcome, "attempts">;
      /**
       * What the prefill worker reported of the prompt (prompt and cached tokens): where the prefix
       * cache is, so what the cache account reads. The decode side reports the handed-off KV as
       * cached, which says nothing about the prefill worker's cache.
       */
      prefillUsage?: ReportedUsage;
    }
  | { kind: "failed"; failure: AttemptFailure; failed: ReadonlySet<Side> };

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

/** One side as the pair's verdict sees it. */
export interface SideState {
  readonly side: Side;
  readonly attempt: Attempt;
  readonly result: SideResult;
}

/**
 * A pair's failed side answered one of these before the client saw anything: another pair may do
 * better. The regular statuses (RETRYABLE_STATUS) and a 500, as SGLang's gateway retries a pair
 * (sgl-project/sglang sgl-model-gateway/src/routers/http/pd_router.rs: execute_dual_dispatch's
 * RetryExecutor with is_retryable_status, 500 included): an engine answers a failed KV hand-off
 * with a 500, which says nothing about the next pair.
 */
const PAIR_RETRYABLE_STATUS: ReadonlySet<number> = new Set([...RETRYABLE_STATUS, 500]);

/**
 * Sends one side's request through the proxy's upstream call (upstream-call.ts), as every other
 * request to a worker goes, with the engine's priority when the attempt carries one; never rejects.
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
        body: bodyWithPriority(body, worker.engine, attempt.enginePriority) ?? body,
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

/** Whether a failed side's answer is one another pair may do better with. */
export function retryableAnswer(result: SideResult): boolean {
  return result.kind === "answer" && PAIR_RETRYABLE_STATUS.has(result.upstream.statusCode);
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
 * Resolves true when the answer came whole, false when it broke off; bounded by the attempt's
 * request timeout; never rejects.
 */
export function drainSide(
  attempt: Attempt,
  upstream: UpstreamAnswer,
  /** Reads the prefill worker's cached-token count on the way (the request's cache account). */
  tap?: UsageTap,
): Promise<boolean> {
  return new Promise((resolve) => {
    upstream.pipeTo({
      onData(chunk) {
        attempt.firstByte();
        tap?.write(chunk);
      },
      onEnd() {
        attempt.end({ kind: "answered", status: upstream.statusCode });
        resolve(true);
      },
      onError() {
        const reason = attempt.controller.reason;
        // Stopped by the router (client gone, partner failed, shutdown): nothing about the worker.
        const stopped =
          reason instanceof ClientAbort ||
          reason instanceof PartnerFailed ||
          reason instanceof ShutdownAbort;
        attempt.end(stopped ? NEUTRAL : FAILED);
        resolve(false);
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

/** A side that did not answer 2xx and was not stopped by the router. */
export function failedOnItsOwn(state: SideState): boolean {
  const r = state.result;
  if (r.kind === "answer") return r.upstream.statusCode < 200 || r.upstream.statusCode >= 300;
  return stopReason(r) === undefined;
}

/** Stops the partner of a side that failed, at once: no reason to wait for its answer. */
export function stopPartner(partner: Attempt): void {
  if (!partner.controller.aborted) partner.controller.abort(new PartnerFailed());
}

/**
 * The client left or the router is shutting down while the sides ran: every side is dropped;
 * undefined when neither happened.
 */
export function interrupted(t: PairTry, states: readonly SideState[]): PairResult | undefined {
  const shutdown = states.some((s) => stopReason(s.result) === "shutdown");
  if (!t.req.clientSignal.aborted && !shutdown) return undefined;
  for (const s of states) dropSide(s.attempt, s.result);
  const worker = t.decode;
  if (t.req.clientSignal.aborted) {
    return { kind: "done", outcome: { status: 499, worker, error: "client_abort" } };
  }
  const error = new RouterError(
    "shutting_down",
    "The router is shutting down and its --shutdown-grace-secs ran out; retry the request.",
  );
  writeError(t.res, error, t.req.requestId);
  return { kind: "done", outcome: { status: error.status, worker, error: "shutdown" } };
}

/**
 * Some side failed before the client saw a byte. A failing side's answer that no retry would
 * better (a 400, or a 5xx on the last try) goes to the client as the worker sent it; otherwise
 * each failed side tells its own breaker, the others are dropped without blame, and the pair is
 * to be tried again if the failure allows.
 */
export async function failedPair(t: PairTry, states: readonly SideState[]): Promise<PairResult> {
  let failing = states.filter(failedOnItsOwn);
  // Both stopped by each other cannot happen; if it did, the first side takes the blame.
  if (failing.length === 0) failing = states.slice(0, 1);
  const first = failing[0]!;
  if (
    first.result.kind === "answer" &&
    (!retryableAnswer(first.result) || !t.canRetry(first.side))
  ) {
    for (const s of states) if (s !== first) dropSide(s.attempt, s.result);
    const { outcome } = await relay(first.result.upstream, first.attempt, t.res);
    return { kind: "done", outcome: { ...outcome, prefillWorker: t.prefill } };
  }
  const failed = new Set<Side>();
  let failure: AttemptFailure | undefined;
  for (const s of states) {
    if (!failing.includes(s)) {
      dropSide(s.attempt, s.result);
      continue;
    }
    failed.add(s.side);
    const f = sideFailure(s.attempt, s.result);
    // "Worker http://... answered 503." → "Prefill worker http://... answered 503."
    const side = s.side === "prefill" ? "Prefill" : "Decode";
    failure ??= { ...f, message: `${side} ${f.message.replace(/^Worker/, "worker")}` };
  }
  return { kind: "failed", failure: failure!, failed };
}
