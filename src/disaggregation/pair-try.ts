/**
 * One try of a prefill/decode pair, for either protocol: what it needs from the forwarder, and
 * how a failure before the client saw anything becomes an answer or a retry. The rule of the
 * pair: if either side fails before the first byte reached the client, the pair is tried again
 * (when the failure is one another worker may not repeat); once the decode side's answer has
 * begun, never. Each side's breaker hears only about its own worker.
 */
import type { ServerResponse } from "node:http";
import { RouterError } from "../errors.js";
import type { Attempt } from "../proxy/attempt.js";
import type { ForwardOutcome, ForwardRequest } from "../proxy/forward.js";
import { relay } from "../proxy/relay.js";
import type { AttemptFailure } from "../proxy/upstream-failure.js";
import type { ReportedUsage } from "../proxy/usage-tap.js";
import { writeError } from "../proxy/write-error.js";
import type { Worker } from "../workers/worker.js";
import type { JsonObject } from "./bootstrap.js";
import {
  dropSide,
  PartnerFailed,
  retryableAnswer,
  type SideResult,
  sideFailure,
  stopReason,
} from "./pair-sides.js";

export type Side = "prefill" | "decode";

/** What a pair's dispatch gets from the forwarder for one try. */
export interface PairTry {
  readonly req: ForwardRequest;
  readonly res: ServerResponse;
  /** The client's JSON body, parsed once for the whole request. */
  readonly body: JsonObject;
  /** The same body as the client sent it (SGLang's hand-off fields are spliced into it). */
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
  track(attempt: Attempt, work: Promise<void>): void;
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

/** One side as the pair's verdict sees it. */
export interface SideState {
  readonly side: Side;
  readonly attempt: Attempt;
  readonly result: SideResult;
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
