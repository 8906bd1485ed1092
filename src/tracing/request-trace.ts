/**
 * What the request path tells a trace, as interfaces only: the OpenTelemetry implementation
 * (otel-tracing.ts) is loaded by start-tracing.ts only when tracing is on. With tracing off the
 * request path holds `undefined` where a trace would be, so each hook costs one check.
 */
import type { IncomingHttpHeaders } from "node:http";
import type { AccountedDecision, RequestAccount } from "../cache-account/request-account.js";

/** The steps of a request before its first upstream attempt, each a child span. */
export type PhaseName = "body_read" | "tokenize" | "queue_wait";

/** A span under way; end() once (later calls do nothing). */
export interface PhaseSpan {
  end(): void;
}

/** The decision's span: ended with what was decided (undefined: no worker could take it). */
export interface DecisionSpan {
  end(policy: string, decision: AccountedDecision | undefined): void;
}

/** An upstream worker as a span names it. */
export interface TracedWorker {
  readonly id: string;
  readonly url: string;
}

/** How an attempt ended (workers/lease.ts LeaseOutcome). */
export type TracedAttemptEnd =
  | { readonly kind: "answered"; readonly status: number }
  | { readonly kind: "failed" }
  | { readonly kind: "neutral" };

/** One upstream attempt's span (a retry, each side of a prefill/decode pair). */
export interface AttemptTrace {
  /** The upstream headers with this attempt's traceparent (and the client's tracestate). */
  inject(headers: Record<string, string | string[]>): Record<string, string | string[]>;
  /** The worker's answer began with this status (a retried 503 included). */
  status(code: number): void;
  /**
   * The worker's first body byte: an event on the attempt's and the request's span (once; with a
   * prefill/decode pair each side's, the side named).
   */
  firstByte(): void;
  end(outcome: TracedAttemptEnd): void;
}

/** What the request span reads when the request ends (proxy/forward.ts ForwardOutcome). */
export interface TracedOutcome {
  readonly status: number;
  readonly attempts: number;
  readonly ttfbMs?: number | undefined;
  readonly error?: string | undefined;
  readonly worker?: TracedWorker | undefined;
  readonly prefillWorker?: TracedWorker | undefined;
  readonly account?: RequestAccount | undefined;
}

/** One request's trace: its span and the children the request path opens. */
export interface RequestTrace {
  phase(name: PhaseName): PhaseSpan;
  decision(): DecisionSpan;
  /** An upstream attempt's span, numbered in the order they start (both sides of a pair count). */
  attempt(worker: TracedWorker, side?: "prefill" | "decode"): AttemptTrace;
  /**
   * Ends the request span with the outcome (status, worker, the cache account), and any child
   * left open by a failure (a body read refused, a decision that threw).
   */
  end(outcome: TracedOutcome): void;
}

/** The tracer as the router holds it while tracing is on. */
export interface Tracing {
  /** A request arrives: its span, a child of the client's traceparent when it sent one. */
  start(
    headers: IncomingHttpHeaders,
    method: string,
    path: string,
    requestId: string,
    startedAt: number,
  ): RequestTrace;
  /** Exports what is buffered and stops (bounded by `timeoutMs`). */
  shutdown(timeoutMs: number): Promise<void>;
}
