import type { IncomingHttpHeaders, ServerResponse } from "node:http";
import type { Dispatcher } from "undici";
import { RouterError } from "../errors.js";
import type { RoutingDecider } from "../policies/decider.js";
import type { RouteBranch } from "../policies/policy.js";
import type { WorkerRegistry } from "../workers/registry.js";
import type { Worker } from "../workers/worker.js";
import { ClientAbort, FirstByteTimeout, RequestTimeout, timerMs } from "./abort-reasons.js";
import { backoffMs, retryAfterMs, sleep } from "./backoff.js";
import { upstreamRequestHeaders } from "./headers.js";
import { relay } from "./relay.js";
import {
  type AttemptFailure,
  classifyNetworkError,
  RETRYABLE_STATUS,
  statusFailure,
} from "./upstream-failure.js";
import { writeError } from "./write-error.js";

export interface ForwardSettings {
  requestTimeoutMs: number;
  firstByteTimeoutMs: number;
  idleTimeoutMs: number;
  retryMaxAttempts: number;
  retryInitialBackoffMs: number;
  retryMaxBackoffMs: number;
  /** Forward the client's Authorization header to workers (only when the router has no key of its own). */
  forwardAuthorization: boolean;
}

/** What the forwarder reports about one request, for the access log and metrics. */
export interface ForwardOutcome {
  status: number;
  worker?: Worker;
  branch?: RouteBranch;
  matchRate?: number | null;
  /** The prefix index behind matchRate, when the policy used one. */
  index?: string | null;
  attempts: number;
  /** ms from arrival to the first body byte sent to the client. */
  ttfbMs?: number;
  /** Set when the request did not end normally: client_abort, stream_error, timeout, ... */
  error?: string;
}

export interface ForwardHooks {
  onDecision(policy: string, branch: RouteBranch, matchRate: number | null): void;
  onRetry(endpoint: string): void;
  onUpstreamError(worker: Worker, kind: string): void;
}

export interface ForwardRequest {
  /** Metric label of the route (chat, completions, generate, embeddings, models). */
  endpoint: string;
  method: "GET" | "POST";
  /** Path and query as received, e.g. "/v1/chat/completions". */
  path: string;
  headers: IncomingHttpHeaders;
  body: Buffer | undefined;
  text: string;
  model: string | undefined;
  requestId: string;
  startedAt: number;
  /** Aborted when the client goes away. */
  clientSignal: AbortSignal;
}

/**
 * Sends one request to a worker chosen by the policy and streams the answer back unbuffered.
 * Retries go to workers not yet tried, only before anything reached the client, and only for
 * failures that are safe to repeat.
 */
export class Forwarder {
  constructor(
    private readonly registry: WorkerRegistry,
    private readonly decider: RoutingDecider,
    private readonly settings: ForwardSettings,
    private readonly hooks: ForwardHooks,
  ) {}

  async forward(req: ForwardRequest, res: ServerResponse): Promise<ForwardOutcome> {
    const deadline = req.startedAt + this.settings.requestTimeoutMs;
    const tried = new Set<Worker>();
    const headers = upstreamRequestHeaders(
      req.headers,
      req.requestId,
      this.settings.forwardAuthorization,
    );
    let lastFailure: AttemptFailure | undefined;
    let attempts = 0;

    while (attempts < this.settings.retryMaxAttempts) {
      if (req.clientSignal.aborted) return { status: 499, attempts, error: "client_abort" };
      const candidates = this.registry.candidates(tried);
      const decision = this.decider.decide(candidates, req);
      if (!decision) break;
      this.hooks.onDecision(this.decider.policy.name, decision.branch, decision.matchRate);
      const worker = decision.worker;
      tried.add(worker);
      attempts += 1;
      const base = {
        worker,
        branch: decision.branch,
        matchRate: decision.matchRate,
        index: decision.index,
        attempts,
      };
      // On the last possible attempt a retryable answer is passed through as the worker sent it.
      const canRetry = () =>
        attempts < this.settings.retryMaxAttempts && this.registry.candidates(tried).length > 0;

      const result = await this.attempt(
        worker,
        req,
        headers,
        deadline,
        res,
        base.branch,
        base.matchRate,
        canRetry,
      );
      if (result.kind === "done") {
        // Only what a worker accepted stays in its index entry: an error answer, or a client gone
        // before the answer began, caches nothing there.
        if (!accepted(result.outcome)) this.decider.rejected(decision, req);
        return { ...base, ...result.outcome };
      }
      this.decider.rejected(decision, req);
      lastFailure = result.failure;
      this.hooks.onUpstreamError(worker, result.failure.kind);
      if (!result.failure.retryable) break;
      const remaining = deadline - Date.now();
      const delay =
        result.retryAfterMs ??
        backoffMs(attempts, this.settings.retryInitialBackoffMs, this.settings.retryMaxBackoffMs);
      if (attempts >= this.settings.retryMaxAttempts || delay >= remaining) break;
      if (this.registry.candidates(tried).length === 0) break;
      this.hooks.onRetry(req.endpoint);
      await sleep(delay, req.clientSignal);
    }

    if (req.clientSignal.aborted) return { status: 499, attempts, error: "client_abort" };
    const error = lastFailure
      ? new RouterError(lastFailure.code, lastFailure.message)
      : new RouterError("no_workers_available", noWorkerMessage(this.registry));
    writeError(res, error, req.requestId);
    return { status: error.status, attempts, error: lastFailure?.kind ?? "no_workers" };
  }

  /** One try against one worker. Either the response was (or is being) sent, or it failed before any byte. */
  private async attempt(
    worker: Worker,
    req: ForwardRequest,
    headers: Record<string, string | string[]>,
    deadline: number,
    res: ServerResponse,
    branch: RouteBranch,
    matchRate: number | null,
    canRetry: () => boolean,
  ): Promise<
    | { kind: "done"; outcome: Omit<ForwardOutcome, "attempts"> }
    | { kind: "failed"; failure: AttemptFailure; retryAfterMs?: number }
  > {
    const controller = new AbortController();
    const onClientGone = () => controller.abort(new ClientAbort());
    req.clientSignal.addEventListener("abort", onClientGone, { once: true });
    const overall = setTimeout(
      () => controller.abort(new RequestTimeout()),
      timerMs(deadline - Date.now()),
    );
    // Native timers, not undici's headersTimeout/bodyTimeout: those run on a coarse clock that
    // fires up to a second late, so a 0.3 s first-byte timeout would really be ~1 s.
    const firstByte = setTimeout(
      () => controller.abort(new FirstByteTimeout()),
      timerMs(this.settings.firstByteTimeoutMs),
    );
    worker.inFlight += 1;
    worker.breaker.onDispatch();
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      worker.inFlight -= 1;
      clearTimeout(overall);
      clearTimeout(firstByte);
      req.clientSignal.removeEventListener("abort", onClientGone);
    };

    let upstream: Dispatcher.ResponseData;
    try {
      upstream = await worker.pool.request({
        method: req.method,
        path: worker.basePath + req.path,
        headers,
        body: req.body ?? null,
        signal: controller.signal,
        // 0 = off: the timers above and in relay() bound the wait instead.
        headersTimeout: 0,
        bodyTimeout: 0,
      });
    } catch (err) {
      release();
      const reason = controller.signal.reason;
      if (reason instanceof ClientAbort) {
        worker.breaker.onNeutral();
        return { kind: "done", outcome: { status: 499, worker, error: "client_abort" } };
      }
      worker.breaker.onFailure();
      return { kind: "failed", failure: classifyNetworkError(err, reason, worker) };
    }

    clearTimeout(firstByte);
    const status = upstream.statusCode;
    if (RETRYABLE_STATUS.has(status) && canRetry()) {
      const retryAfter = retryAfterMs(upstream.headers["retry-after"]);
      const withinBudget =
        retryAfter === undefined ||
        (retryAfter <= this.settings.retryMaxBackoffMs && retryAfter < deadline - Date.now());
      if (withinBudget) {
        // Nothing reached the client yet: discard this answer and let the caller try another worker.
        upstream.body.dump().catch(() => {});
        release();
        if (status === 429) worker.breaker.onNeutral();
        else worker.breaker.onFailure();
        return {
          kind: "failed",
          failure: statusFailure(status, worker),
          ...(retryAfter !== undefined ? { retryAfterMs: retryAfter } : {}),
        };
      }
    }

    const outcome = await relay(
      upstream,
      worker,
      req,
      res,
      controller,
      routeHeader(branch, matchRate),
      this.settings.idleTimeoutMs,
      this.hooks.onUpstreamError,
    );
    release();
    return { kind: "done", outcome };
  }
}

/** The worker took the request: a 2xx answer (streamed to the end or cut later by the client). */
function accepted(outcome: { status: number }): boolean {
  return outcome.status >= 200 && outcome.status < 300;
}

function routeHeader(branch: RouteBranch, matchRate: number | null): string {
  return matchRate === null ? branch : `${branch};match=${matchRate.toFixed(2)}`;
}

function noWorkerMessage(registry: WorkerRegistry): string {
  const total = registry.size;
  return total === 0
    ? "No workers are registered; add one with POST /workers or start with --worker-urls."
    : `None of the ${total} registered workers is available (unhealthy or circuit open).`;
}
