import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { RouterError } from "../errors.js";
import type { OpenedRequest } from "../intake/intake.js";
import type { Endpoint } from "../intake/routing-text.js";
import { Cancel, ClientGoneError } from "../proxy/cancel.js";
import type { ForwardOutcome, ForwardRequest } from "../proxy/forward.js";
import { RELAYED_HEADER } from "../proxy/leader-relay.js";
import { writeError } from "../proxy/write-error.js";
import type { RequestTrace } from "../tracing/request-trace.js";
import type { LoraLoader } from "../workers/lora-loader.js";
import { type ResponseHolders, ResponseIdSniffer } from "../workers/response-holders.js";
import { adapterNamed } from "../workers/served-models.js";
import type { Worker } from "../workers/worker.js";
import { admissionTicket } from "./admission-ticket.js";
import { adminAllowed } from "./auth.js";
import { admitClient } from "./client-gate.js";
import { joinConnection } from "./connection-requests.js";
import type { RouterContext } from "./context.js";
import { lingerOnUnreadBody } from "./linger.js";

/**
 * The one coordinator of a data-plane request (a POST with a body to an inference endpoint),
 * answered on the raw response; never throws. Each stage is one call into its folder:
 *
 *   receive   intake/      Intake.open: the body's lease, the body in its bounds, one parse, the
 *                          routing facts, the RoutingRequest against the fleet as it is now
 *   relay     proxy/       LeaderRelay (--state-advertise-url): the leader replica runs every
 *                          stage below for the request; with --state-relay decisions its forward
 *                          stage answers with a decision that this replica carries out
 *                          (proxy/leader-decisions.ts), with all or new-prefixes (a new prefix
 *                          only) it serves the request too; back here only when the leader could
 *                          not take it
 *   admit     admission/   Admission.pass: quotas, the queue; the pass carries the engine's
 *                          priority (--engine-priority) and where the request has room
 *   schedule  scheduling/  Scheduler.schedule, per attempt, from the forward stage's retry loop
 *   forward   proxy/       Forwarder.forward: the one retry loop (before the first byte only); a
 *                          prefill/decode pair is one attempt; usage fed back, the account settled
 *   complete  here         the pass and the body's lease given back, metrics, one access line
 *
 * Nothing below calls back up: every later stage gets what an earlier one made.
 */
export async function handleInference(
  ctx: RouterContext,
  incoming: IncomingMessage,
  res: ServerResponse,
  endpoint: Endpoint,
): Promise<void> {
  const startedAt = Date.now();
  const header = requestIdHeader(incoming, ctx.config.requestIdHeaders);
  const requestId =
    typeof header === "string" && header !== "" && header.length <= 200 ? header : randomUUID();
  // With tracing off (the default) this is undefined and every span hook below is one check.
  const trace = ctx.tracing?.start(
    incoming.headers,
    incoming.method ?? "POST",
    incoming.url ?? "/",
    requestId,
    startedAt,
  );
  const client = new Cancel();
  // The connection, not the response: a pipelined request behind this one has no socket yet.
  const connection = joinConnection(incoming.socket, () => {
    if (!res.writableFinished) client.abort();
  });
  // The next request of the connection may start once this answer has left: a decision call
  // (--data-plane nginx) is answered long before its request ends, and nginx reuses the connection.
  res.on("finish", connection.leave);
  ctx.state.active += 1;
  let opened: OpenedRequest | undefined;
  let outcome: ForwardOutcome;
  try {
    // A pipelined request starts once the one before it on its connection has ended.
    if (connection.ready !== undefined) {
      await connection.ready;
      if (client.aborted) throw new ClientGoneError();
    }
    admitClient(ctx, incoming.headers.authorization);
    // Receive: the body is read (and refused early: 400, 413, 415...) before the request takes
    // a queue slot.
    const bodyRead = trace?.phase("body_read");
    opened = await ctx.intake.open(incoming, endpoint);
    bodyRead?.end();
    // Relayed before an adapter is loaded: the leader loads it where it sends the request.
    // Awaited only when it relays: no promise and no turn for the requests decided here.
    const relaying = relayToLeader(ctx, incoming, res, opened, requestId, startedAt, client);
    const relayed = relaying === undefined ? undefined : await relaying;
    if (relayed !== undefined) outcome = relayed;
    else {
      if (ctx.loraLoader !== undefined)
        opened = await withAdapterLoaded(ctx, ctx.loraLoader, opened, client);
      outcome = await admitAndForward(ctx, incoming, res, opened, {
        requestId,
        startedAt,
        clientSignal: client,
        trace,
      });
    }
  } catch (err) {
    outcome = failed(err, incoming, res, requestId, ctx);
  } finally {
    // Complete: the body's bytes leave the router-wide budget.
    opened?.lease.release();
    ctx.state.active -= 1;
    connection.leave();
  }
  // A replica's decide call (--state-relay decisions) is its client's request, counted there:
  // here it is one access line, so the fleet's request metrics add up to its clients' requests.
  const decideCall = ctx.peerCalls?.relays.has(res) === true;
  observe(ctx, endpoint, incoming, requestId, startedAt, outcome, decideCall);
  trace?.end(outcome);
}

/**
 * The relay stage: a request goes to the leader replica, which decides it (proxy/leader-relay.ts:
 * every request with --state-relay decisions or all, one that would claim a new prefix with
 * new-prefixes); undefined when it is decided here. A request a peer relayed here is told at once
 * (102 Processing) that this replica has it, so its relay stops waiting to fall back: from then on
 * it runs here, whatever this replica's rank.
 */
function relayToLeader(
  ctx: RouterContext,
  incoming: IncomingMessage,
  res: ServerResponse,
  opened: OpenedRequest,
  requestId: string,
  startedAt: number,
  client: Cancel,
): Promise<ForwardOutcome | undefined> | undefined {
  if (incoming.headers[RELAYED_HEADER] !== undefined) {
    if (!res.headersSent) res.writeProcessing();
    return undefined;
  }
  const relay = ctx.leaderRelay;
  const leader = relay?.target(incoming.headers, opened.routing);
  if (relay === undefined || leader === undefined) return undefined;
  return relay.send(
    leader,
    {
      incoming,
      body: opened.received.body,
      requestId,
      startedAt,
      client,
      stream: opened.routing.stream,
      responses: opened.received.endpoint === "responses",
    },
    res,
  );
}

/** The admit, forward and complete stages of a received request. */
async function admitAndForward(
  ctx: RouterContext,
  incoming: IncomingMessage,
  res: ServerResponse,
  opened: OpenedRequest,
  request: Pick<ForwardRequest, "requestId" | "startedAt" | "clientSignal" | "trace">,
): Promise<ForwardOutcome> {
  const { clientSignal, trace } = request;
  // Its connection closed while it was read (a pipelined request): nothing more to do for it.
  if (clientSignal.aborted) throw new ClientGoneError();
  // Admit: waits only while the router is at its limit or, with --queue-when-saturated, the
  // fleet is; the pass carries the engine's priority and where the request has room.
  const admitting = ctx.admission.pass(admissionTicket(ctx, opened.received, clientSignal));
  const waited = admitting instanceof Promise;
  const pass = waited ? await queued(admitting, trace, ctx.config.queueWaitHeader, res) : admitting;
  // Not queued at all: the header says so too (a wait of 0), so every answer carries it.
  if (!waited) waitHeader(res, ctx.config.queueWaitHeader, 0);
  // How it ended, for a quota to charge what the engine reported (none if it never left here).
  let outcome: ForwardOutcome | undefined;
  try {
    if (clientSignal.aborted) throw new ClientGoneError();
    outcome = await ctx.forwarder.forward(
      {
        // Named, not spread: a spread followed by eight properties built this object in about
        // three times the time of naming every one (Node 24, 95-111 ns against 34-42).
        requestId: request.requestId,
        startedAt: request.startedAt,
        clientSignal,
        trace,
        // After a wait, against the fleet as it is now: a worker that joined or listed its
        // models meanwhile counts. Without one, nothing can have changed since it was received.
        routing: waited ? ctx.intake.route(opened.received) : opened.routing,
        method: "POST",
        path: incoming.url ?? "/",
        headers: incoming.headers,
        // --engine-priority: the engine's scheduler serves it in the router's order too.
        priority: pass.priority,
        // --queue-when-saturated: to a worker with room, or, over lower-priority work while every
        // one is saturated, to one where it outranks that work.
        roomOn: pass.roomOn,
        showMatch:
          ctx.config.explainMatch ||
          adminAllowed(
            ctx.config.adminApiKey,
            incoming.headers.authorization,
            // A relayed request's socket is the relaying replica's, which may be on loopback:
            // its client is not. (A client sending the header itself only loses the privilege.)
            incoming.headers[RELAYED_HEADER] === undefined
              ? incoming.socket.remoteAddress
              : undefined,
          ),
        onAnswerChunk:
          opened.received.endpoint === "responses"
            ? responseIdRecorder(ctx.responseHolders)
            : undefined,
      },
      res,
    );
    return outcome;
  } finally {
    pass.release(outcome);
  }
}

/**
 * --lora-load-on-demand: a request naming an adapter of --lora-paths that no available worker
 * holds waits for its load (workers/lora-loader.ts), then is routed against the fleet as it is
 * then, as after a wait for admission. The client leaving stops its wait, not the load.
 */
async function withAdapterLoaded(
  ctx: RouterContext,
  loader: LoraLoader,
  opened: OpenedRequest,
  client: Cancel,
): Promise<OpenedRequest> {
  const { routing } = opened;
  const adapter = loader.missing(adapterNamed(routing.requested, routing.adapter));
  if (adapter === undefined) return opened;
  await unlessGone(loader.load(adapter), client);
  return { ...opened, routing: ctx.intake.route(opened.received) };
}

/** `work`, or ClientGoneError as soon as the client leaves. */
function unlessGone<T>(work: Promise<T>, client: Cancel): Promise<T> {
  if (client.aborted) return Promise.reject(new ClientGoneError());
  return new Promise<T>((resolve, reject) => {
    const gone = () => reject(new ClientGoneError());
    client.once("abort", gone);
    work.then(resolve, reject).finally(() => client.off("abort", gone));
  });
}

/** Records which worker produced the response whose answer goes by (routes on previous_response_id). */
function responseIdRecorder(holders: ResponseHolders) {
  const sniffer = new ResponseIdSniffer();
  return (chunk: Buffer, worker: Worker) => {
    const id = sniffer.write(chunk);
    if (id !== undefined) holders.record(id, worker.id);
  };
}

/**
 * A wait in the admission queue, as the trace's queue_wait span and, with --queue-wait-header, a
 * response header: released or refused (429 after its deadline), the answer says how long it waited.
 */
async function queued<T>(
  waiting: Promise<T>,
  trace: RequestTrace | undefined,
  header: string | undefined,
  res: ServerResponse,
): Promise<T> {
  const span = trace?.phase("queue_wait");
  const since = performance.now();
  try {
    return await waiting;
  } finally {
    span?.end();
    waitHeader(res, header, performance.now() - since);
  }
}

/** Set on the response now; the answer's writeHead (relay, writeError) merges it in. */
function waitHeader(res: ServerResponse, header: string | undefined, waitedMs: number): void {
  if (header === undefined || res.headersSent) return;
  res.setHeader(header, String(Math.round(waitedMs)));
}

/**
 * Errors after which the connection is closed at once: a client of a router that is shutting down
 * should reconnect elsewhere, and a client too slow with its body is not worth waiting for.
 */
const CLOSE_AFTER: ReadonlySet<string> = new Set(["shutting_down", "body_timeout"]);

/** Answers a failure that happened before any worker answered. */
function failed(
  err: unknown,
  incoming: IncomingMessage,
  res: ServerResponse,
  requestId: string,
  ctx: RouterContext,
): ForwardOutcome {
  if (err instanceof ClientGoneError) return { status: 499, attempts: 0, error: "client_abort" };
  if (err instanceof RouterError) {
    const close = CLOSE_AFTER.has(err.code);
    const extra: Record<string, string> = close ? { connection: "close" } : {};
    // Bodies in the budget are freed as their requests end: a second is a fair first wait.
    if (err.code === "body_buffer_full") extra["retry-after"] = "1";
    if (err.retryAfterSecs !== undefined) extra["retry-after"] = String(err.retryAfterSecs);
    // An early answer (413, 503, 401...) to a client still sending: drain the rest, bounded, so
    // the client can finish writing and read the answer instead of meeting a reset.
    if (!close) {
      lingerOnUnreadBody(incoming, {
        maxMs: ctx.config.bodyLingerMs,
        maxBytes: ctx.config.bodyLingerBytes,
      });
    }
    // The admission queue counts its own refusals (admission/admission-metrics.ts).
    writeError(res, err, requestId, extra);
    return { status: err.status, attempts: 0, error: err.code };
  }
  ctx.logger.error({ err, request_id: requestId }, "unexpected error while routing");
  const internal = new RouterError("internal_error");
  writeError(res, internal, requestId);
  if (!res.headersSent) res.destroy();
  return { status: 500, attempts: 0, error: "internal_error" };
}

/** One access-log line and the request metrics. */
function observe(
  ctx: RouterContext,
  endpoint: string,
  incoming: IncomingMessage,
  requestId: string,
  startedAt: number,
  outcome: ForwardOutcome,
  /** A replica's decide call: an access line only (its request is counted at the replica). */
  decideCall = false,
): void {
  const durationMs = Date.now() - startedAt;
  if (!decideCall) {
    const status = String(outcome.status);
    ctx.metrics.requests.inc({ endpoint, status });
    ctx.metrics.requestDuration.observe({ endpoint }, durationMs / 1000);
    if (outcome.ttfbMs !== undefined)
      ctx.metrics.timeToFirstByte.observe({ endpoint }, outcome.ttfbMs / 1000);
  }
  ctx.accessLog.info(
    {
      request_id: requestId,
      endpoint,
      path: incoming.url,
      worker: outcome.worker?.id,
      worker_url: outcome.worker?.url,
      prefill_worker: outcome.prefillWorker?.id,
      branch: outcome.branch,
      match_rate: outcome.matchRate ?? undefined,
      index: outcome.index ?? undefined,
      status: outcome.status,
      attempts: outcome.attempts,
      duration_ms: durationMs,
      ttfb_ms: outcome.ttfbMs,
      error: outcome.error,
      decided_for_peer: decideCall || undefined,
    },
    "request",
  );
}

/** The first of the configured request-id headers the client sent (--request-id-headers). */
function requestIdHeader(incoming: IncomingMessage, names: readonly string[]): string | undefined {
  for (const name of names) {
    const value = incoming.headers[name];
    if (typeof value === "string" && value !== "") return value;
  }
  return undefined;
}
