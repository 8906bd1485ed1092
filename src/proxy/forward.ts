import type { IncomingHttpHeaders, ServerResponse } from "node:http";
import type { Dispatcher } from "undici";
import { errors as undiciErrors } from "undici";
import { type ErrorCode, errorBody, RouterError } from "../errors.js";
import type { Policy, RouteBranch } from "../policies/policy.js";
import type { WorkerRegistry } from "../workers/registry.js";
import type { Worker } from "../workers/worker.js";
import { backoffMs, retryAfterMs, sleep } from "./backoff.js";
import { responseHeaders, upstreamRequestHeaders } from "./headers.js";

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

/** Statuses after which another worker may succeed and nothing reached the client yet. */
const RETRYABLE_STATUS = new Set([429, 502, 503, 504]);
/** Network failures where the worker never got the request (down, unreachable). */
const CONNECT_FAILURES = new Set([
  "ECONNREFUSED",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "UND_ERR_CONNECT_TIMEOUT",
]);
/**
 * The connection was lost before any response (worker killed or restarted mid-request). The
 * worker may have started, but nothing reached the client and a lost connection aborts the work
 * on the engine, so another worker may take the request.
 */
const RESET_FAILURES = new Set(["ECONNRESET", "EPIPE", "UND_ERR_SOCKET"]);

type AttemptFailure = { kind: string; retryable: boolean; code: ErrorCode; message: string };

/**
 * Sends one request to a worker chosen by the policy and streams the answer back unbuffered.
 * Retries go to workers not yet tried, only before anything reached the client, and only for
 * failures that are safe to repeat.
 */
export class Forwarder {
  constructor(
    private readonly registry: WorkerRegistry,
    private readonly policy: Policy,
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
      const decision = this.policy.select(candidates, { text: req.text, model: req.model });
      if (!decision) break;
      this.hooks.onDecision(this.policy.name, decision.branch, decision.matchRate);
      const worker = decision.worker;
      tried.add(worker);
      attempts += 1;
      const base = { worker, branch: decision.branch, matchRate: decision.matchRate, attempts };
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
      if (result.kind === "done") return { ...base, ...result.outcome };
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
          failure: {
            kind: `status_${status}`,
            retryable: true,
            code:
              status === 504
                ? "upstream_timeout"
                : status === 429
                  ? "too_many_requests"
                  : "upstream_error",
            message: `Worker ${worker.url} answered ${status}.`,
          },
          ...(retryAfter !== undefined ? { retryAfterMs: retryAfter } : {}),
        };
      }
    }

    const outcome = await this.relay(upstream, worker, req, res, controller, branch, matchRate);
    release();
    return { kind: "done", outcome };
  }

  /** Streams the worker's answer to the client as it arrives, honouring back-pressure. */
  private relay(
    upstream: Dispatcher.ResponseData,
    worker: Worker,
    req: ForwardRequest,
    res: ServerResponse,
    controller: AbortController,
    branch: RouteBranch,
    matchRate: number | null,
  ): Promise<Omit<ForwardOutcome, "attempts">> {
    const status = upstream.statusCode;
    const contentType = String(upstream.headers["content-type"] ?? "");
    const isEventStream = contentType.startsWith("text/event-stream");
    res.writeHead(
      status,
      responseHeaders(upstream.headers, worker.id, routeHeader(branch, matchRate), req.requestId),
    );
    if (typeof res.flushHeaders === "function") res.flushHeaders();

    return new Promise((resolve) => {
      const body = upstream.body;
      let ttfbMs: number | undefined;
      let settled = false;
      const idle = setTimeout(() => {
        // Silence caused by a client that does not read is not the worker's: wait for it.
        if (res.writableNeedDrain) idle.refresh();
        else controller.abort(new IdleTimeout());
      }, timerMs(this.settings.idleTimeoutMs));
      const finish = (outcome: Omit<ForwardOutcome, "attempts">) => {
        if (settled) return;
        settled = true;
        clearTimeout(idle);
        res.off("close", onClientClose);
        resolve(outcome);
      };
      const onClientClose = () => {
        if (res.writableFinished) return;
        // The client left mid-response: stop the worker's work too; not the worker's fault.
        controller.abort(new ClientAbort());
        body.destroy();
        worker.breaker.onNeutral();
        finish({
          status,
          worker,
          error: "client_abort",
          ...(ttfbMs !== undefined ? { ttfbMs } : {}),
        });
      };
      res.on("close", onClientClose);
      body.once("data", () => {
        ttfbMs = Date.now() - req.startedAt;
      });
      body.on("data", () => idle.refresh());
      body.on("end", () => {
        res.end();
        worker.served += 1;
        if (status >= 500) {
          worker.breaker.onFailure();
          this.hooks.onUpstreamError(worker, `status_${status}`);
        } else worker.breaker.onSuccess();
        finish({ status, worker, ...(ttfbMs !== undefined ? { ttfbMs } : {}) });
      });
      body.on("error", (err) => {
        const reason = controller.signal.reason;
        if (reason instanceof ClientAbort) return;
        const timedOut = reason instanceof RequestTimeout || reason instanceof IdleTimeout;
        const kind = timedOut ? "timeout" : "stream";
        worker.breaker.onFailure();
        this.hooks.onUpstreamError(worker, kind);
        if (isEventStream && !res.destroyed) {
          // Tell a streaming client in-band that the stream broke, then close it cleanly.
          const code: ErrorCode = timedOut ? "upstream_timeout" : "upstream_error";
          const message =
            reason instanceof IdleTimeout
              ? `Worker ${worker.url} sent nothing for --idle-timeout-secs.`
              : reason instanceof RequestTimeout
                ? `Request to worker ${worker.url} exceeded --request-timeout-secs.`
                : `Worker ${worker.url} failed mid-stream: ${err.message}`;
          res.end(`data: ${JSON.stringify(errorBody(code, message))}\n\n`);
        } else {
          // A truncated JSON body must not look complete: cut the connection.
          res.destroy();
        }
        finish({ status, worker, error: kind, ...(ttfbMs !== undefined ? { ttfbMs } : {}) });
      });
      body.pipe(res, { end: false });
    });
  }
}

class ClientAbort extends Error {
  constructor() {
    super("client disconnected");
  }
}

class RequestTimeout extends Error {
  constructor() {
    super("request timeout");
  }
}

class FirstByteTimeout extends Error {
  constructor() {
    super("first-byte timeout");
  }
}

class IdleTimeout extends Error {
  constructor() {
    super("idle timeout");
  }
}

function classifyNetworkError(err: unknown, reason: unknown, worker: Worker): AttemptFailure {
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
      retryable: false,
      code: "upstream_timeout",
      message: `Worker ${worker.url} sent no response within --first-byte-timeout-secs.`,
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

/** setTimeout fires at once for delays past 2^31-1 ms (~24.8 days): clamp long settings. */
function timerMs(ms: number): number {
  return Math.min(Math.max(0, ms), 2_147_483_647);
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

/** Writes a router error as JSON, unless a response is already under way. */
export function writeError(
  res: ServerResponse,
  error: RouterError,
  requestId: string,
  extra?: Record<string, string>,
): void {
  if (res.headersSent || res.destroyed) return;
  const body = JSON.stringify(error.toBody());
  res.writeHead(error.status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(body),
    "x-request-id": requestId,
    ...extra,
  });
  res.end(body);
}
