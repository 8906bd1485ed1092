/**
 * What the Forwarder (forward.ts) promises the routes (routes/inference.ts): the request it takes,
 * the outcome it reports, its hooks (its options are in settings.ts).
 */
import type { IncomingHttpHeaders } from "node:http";
import type { RequestAccount } from "../cache-account/request-account.js";
import type { RouteBranch } from "../scheduling/policy.js";
import type { RequestTrace } from "../tracing/request-trace.js";
import type { Worker } from "../workers/worker.js";
import type { Cancel } from "./cancel.js";
import type { RoutingRequest } from "./routing-request.js";
import type { ReportedUsage } from "./usage-tap.js";

/** What the forwarder reports about one request, for the access log and metrics. */
export interface ForwardOutcome {
  status: number;
  worker?: Worker;
  /** The decision's branch; "relayed": sent whole to the leader replica, which decided it. */
  branch?: RouteBranch | "relayed";
  matchRate?: number | null;
  /** The prefix index behind matchRate, when the policy used one. */
  index?: string | null;
  attempts: number;
  /** ms from arrival to the first body byte sent to the client. */
  ttfbMs?: number;
  /** Set when the request did not end normally: client_abort, stream_error, timeout, ... */
  error?: string;
  /** The worker's status when the client got another (a client gone mid-stream: 499). */
  upstreamStatus?: number;
  /** The request's cache account (cache-account/), when it used a prefix index and was answered. */
  account?: RequestAccount;
  /** With prefill/decode disaggregation, the prefill side of the pair (`worker` is the decode side). */
  prefillWorker?: Worker;
  /** The engine's token counts, when its answer reported them (a tenant quota charges them). */
  usage?: ReportedUsage | undefined;
}

export interface ForwardHooks {
  onDecision(policy: string, branch: RouteBranch, matchRate: number | null): void;
  onRetry(endpoint: string): void;
  onUpstreamError(worker: Worker, kind: string): void;
}

export interface ForwardRequest {
  /** What the request routes on, built once by intake/ (intake/intake.ts), body included. */
  routing: RoutingRequest;
  method: "GET" | "POST";
  /** Path and query as received, e.g. "/v1/chat/completions". */
  path: string;
  headers: IncomingHttpHeaders;
  requestId: string;
  startedAt: number;
  /** Aborted when the client goes away. */
  clientSignal: Cancel;
  /** The request's trace (tracing/); undefined when tracing is off. */
  trace?: RequestTrace | undefined;
  /** The priority to pass to the engine's scheduler (--engine-priority; higher first); undefined = none. */
  priority?: number | undefined;
  /**
   * Where the request has room (admission's Admission.roomFor, --queue-when-saturated): the
   * workers not saturated, or, while all are, those where it outranks the lower-priority work that
   * fills them (--engine-priority). Its first attempt chooses among them, when any is left;
   * undefined = every candidate.
   */
  roomOn?: ((worker: Worker) => boolean) | undefined;
  /**
   * The match rate may go in x-radixgate-route: it tells how much of the prompt some worker's
   * cache holds, so probing it one character at a time reads another tenant's prompt. Only for
   * admin clients or with --explain-header (routes/inference.ts); undefined = not shown.
   */
  showMatch?: boolean | undefined;
  /**
   * Shown each chunk of a worker's successful answer as it goes by (never holding one back): the
   * Responses route reads the response id there (workers/response-holders.ts).
   */
  onAnswerChunk?: ((chunk: Buffer, worker: Worker) => void) | undefined;
}

/** The worker took the request: a 2xx answer (streamed to the end or cut later by the client). */
export function accepted(outcome: { status: number; upstreamStatus?: number }): boolean {
  // A client gone mid-stream is logged as 499, but the worker had accepted the request.
  const status = outcome.upstreamStatus ?? outcome.status;
  return status >= 200 && status < 300;
}
