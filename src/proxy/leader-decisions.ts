/**
 * --state-relay decisions, a follower's side: the leader replica decides every request and counts
 * it until it ends; this replica carries the bytes, straight to the worker. The follower speaks
 * the decision protocol nginx speaks to its radixgate (routes/decision.ts, proxy/remote-relay.ts):
 *
 *   decide      the request itself (client's headers, body): 102 Processing, then either a
 *               decision (an empty 200 with X-Accel-Redirect and the x-rg-* values) or a refusal
 *               (429, 503, 400... as the leader gives it to its own clients)
 *   body        the body the leader rewrote for the attempt (X-Accel-Redirect: @body)
 *   retry       the worker could not be reached or sent no header in time, before any byte went
 *               to the client: the leader fails that attempt and decides again (or refuses)
 *   first-byte  the worker's first byte came: its prefill is over (nginx cannot say this)
 *   complete    how it ended (status, the engine's token counts), as nginx's log line says
 *
 * Each call is signed with the fleet's --state-secret (signPeerCall): the leader takes calls only
 * from its replicas. The worker's API key never crosses: the follower adds its own (the fleet's
 * workers are shared). A leader that stops before a request's end loses only its count: the
 * follower's relay runs on; the leader's attempt expires at its deadline if no record comes.
 */
import type { OutgoingHttpHeaders, ServerResponse } from "node:http";
import type { Agent } from "undici";
import { errorBody, RouterError } from "../errors.js";
import { ResponseIdSniffer } from "../workers/response-holders.js";
import type { Worker } from "../workers/worker.js";
import { ClientAbort } from "./abort-reasons.js";
import { Cancel, ClientGoneError } from "./cancel.js";
import type { ForwardOutcome } from "./forward-contract.js";
import { passedResponseHeaders, responseHeaders, upstreamRequestHeaders } from "./headers.js";
import { CALL_HEADER, RELAY_VALUES } from "./remote-relay.js";
import type { BodySink, UpstreamAnswer } from "./upstream-call.js";
import { callUpstream } from "./upstream-call.js";
import { UsageTap } from "./usage-tap.js";

/** The signature of a replica's call: `<epoch ms>.<HMAC of the call, its request id and the time>`. */
export const PEER_SIGNATURE_HEADER = "x-radixgate-peer";
/** Which exchange a call after the first is about (the decision's x-rg-key). */
export const REQUEST_HEADER = "x-radixgate-request";
/** A retry call's reason: 502 (no connection) or 504 (no header in time), as nginx's. */
export const FAILED_HEADER = "x-radixgate-failed";

const SCOPE = "radixgate peer call";

/** What signs and checks the calls: the fleet's --state-secret (state/state-secret.ts StateSecret). */
export interface CallSigner {
  sign(scope: string, fields: readonly string[]): string;
  verify(scope: string, fields: readonly string[], signature: string): boolean;
}
/** How far a call's time may be from the leader's clock: replicas' clocks are NTP-close. */
const MAX_SKEW_MS = 60_000;
/** The most a rewritten body fetched from the leader may take (the intake's bound is far lower). */
const MAX_FETCHED_BODY = 256 * 1024 * 1024;

export type PeerCall = "decide" | "retry" | "body" | "first-byte" | "complete";

/** The value of PEER_SIGNATURE_HEADER for one call. */
export function signPeerCall(
  secret: CallSigner,
  call: PeerCall,
  requestId: string,
  now = Date.now(),
): string {
  return `${now}.${secret.sign(SCOPE, [call, requestId, String(now)])}`;
}

/** Whether a call carries a fresh signature of its own call and request id. */
export function verifyPeerCall(
  secret: CallSigner,
  call: string,
  requestId: string,
  value: string | string[] | undefined,
  now = Date.now(),
): boolean {
  if (typeof value !== "string") return false;
  const dot = value.indexOf(".");
  const at = Number(value.slice(0, dot));
  if (dot <= 0 || !Number.isSafeInteger(at) || Math.abs(now - at) > MAX_SKEW_MS) return false;
  return secret.verify(SCOPE, [call, requestId, String(at)], value.slice(dot + 1));
}

export interface LeaderDecisionsOptions {
  /** The fleet's secret: every call is signed with it. */
  readonly secret: CallSigner;
  /** A worker of this replica's registry by id (the leader names workers by id). */
  readonly worker: (id: string) => Worker | undefined;
  /** Whether the client's Authorization goes on to the worker (no --api-key; forward settings). */
  readonly forwardAuthorization: boolean;
  /** --first-byte-timeout, --stream-first-byte-timeout (ms): the worker's header, or a retry. */
  readonly firstByteTimeoutMs: number;
  readonly streamFirstByteTimeoutMs: number;
  /** --idle-timeout-secs (ms): the worker's silence between two chunks. */
  readonly idleTimeoutMs: number;
  /** --queue-wait-header and --explain-header: their values come in the decision. */
  readonly waitHeader: string | undefined;
  readonly explainHeader: string | undefined;
}

/** What a follower knows of the request it carries. */
export interface DecidedRequest {
  readonly path: string;
  /** The client's headers (the worker gets them as a relay passes them, plus the decision's). */
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: Buffer | undefined;
  readonly requestId: string;
  readonly startedAt: number;
  /** Whether the answer streams (its first byte has the streaming bound). */
  readonly stream: boolean;
  /** A Responses API request: the answer's id goes to the leader, which records its holder. */
  readonly responses: boolean;
}

/** A decision's values, read from its headers. */
interface Decision {
  /** The request's id (X-Request-Id to the worker and in the answer). */
  readonly id: string;
  /** What the later calls name the exchange by (RemoteRelays: unique, unlike the id). */
  readonly key: string;
  readonly worker: string;
  readonly route: string;
  readonly via: string | undefined;
  readonly traceparent: string | undefined;
  readonly tracestate: string | undefined;
  readonly rank: string | undefined;
  readonly explain: string | undefined;
  readonly wait: string | undefined;
  /** The leader rewrote the body: fetch it. */
  readonly rewritten: boolean;
  /** The engine's token counts are wanted back. */
  readonly usage: boolean;
}

function one(value: string | string[] | undefined): string | undefined {
  return typeof value === "string" && value !== "" ? value : undefined;
}

/** The decision in an answer of the leader's, or undefined when the answer is a refusal to relay as it is. */
function decisionOf(answer: UpstreamAnswer): Decision | undefined {
  const h = answer.headers;
  const redirect = one(h["x-accel-redirect"]);
  const id = one(h[RELAY_VALUES.rg_rid]);
  const worker = one(h[RELAY_VALUES.rg_worker]);
  const key = one(h[RELAY_VALUES.rg_key]);
  if (
    answer.statusCode !== 200 ||
    redirect === undefined ||
    id === undefined ||
    worker === undefined ||
    key === undefined
  )
    return undefined;
  const next = one(h[RELAY_VALUES.rg_next]) ?? redirect;
  return {
    id,
    key,
    worker,
    route: one(h[RELAY_VALUES.rg_route]) ?? "",
    via: one(h[RELAY_VALUES.rg_via]),
    traceparent: one(h[RELAY_VALUES.rg_tp]),
    tracestate: one(h[RELAY_VALUES.rg_ts]),
    rank: one(h[RELAY_VALUES.rg_rank]),
    explain: one(h[RELAY_VALUES.rg_explain]),
    wait: one(h[RELAY_VALUES.rg_wait]),
    rewritten: redirect === "@body",
    usage: next.startsWith("@relay_u"),
  };
}

/**
 * The follower's part after the leader took the request (its 102): follows the leader's decision,
 * or its refusal, to the end of the client's answer.
 */
export class LeaderDecisions {
  constructor(
    private readonly options: LeaderDecisionsOptions,
    /** The relay's agent to the leader (its connections are kept). */
    private readonly agent: Agent,
  ) {}

  /**
   * `answer` is the leader's to the decide call. Resolves once the client's answer ended; rejects
   * with ClientGoneError when the client left before anything was sent to it.
   */
  async follow(
    leader: string,
    first: UpstreamAnswer,
    request: DecidedRequest,
    res: ServerResponse,
    cancel: Cancel,
  ): Promise<ForwardOutcome> {
    let answer = first;
    let attempts = 0;
    for (;;) {
      const decision = decisionOf(answer);
      if (decision === undefined) {
        // A refusal, or the last failure once the leader has no worker left to try: as it is.
        const outcome = await stream(
          answer,
          res,
          cancel,
          request.startedAt,
          passedResponseHeaders(answer.headers),
        );
        return { ...outcome, attempts: Math.max(1, attempts) };
      }
      answer.dump();
      attempts += 1;
      const failed = (status: number) =>
        this.call(leader, request.path, "retry", decision.key, cancel, undefined, {
          [FAILED_HEADER]: String(status),
        });
      // A call that fails, or the client gone meanwhile, ends the request here: the leader is
      // told, if it still hears, so that its count does not wait for its deadline.
      const ended = (err: unknown): never => {
        const status = err instanceof ClientGoneError ? 499 : 502;
        this.complete(leader, request.path, decision.key, { status });
        throw err;
      };
      const worker = this.options.worker(decision.worker);
      if (worker === undefined) {
        // Not in this replica's registry yet (or any more): for the leader to choose again.
        answer = await this.orGone(failed(502), cancel).catch(ended);
        continue;
      }
      const body = decision.rewritten
        ? await this.orGone(
            this.fetchBody(leader, request.path, decision.key, cancel),
            cancel,
          ).catch(ended)
        : request.body;
      const sentAt = Date.now();
      let upstream: UpstreamAnswer;
      try {
        upstream = await callUpstream(
          worker.pool,
          {
            method: "POST",
            path: worker.basePath + request.path,
            headers: this.workerHeaders(request, decision, worker),
            body: body ?? null,
            headersTimeout: request.stream
              ? this.options.streamFirstByteTimeoutMs
              : this.options.firstByteTimeoutMs,
            bodyTimeout: this.options.idleTimeoutMs,
          },
          cancel,
        );
      } catch (err) {
        if (cancel.reason instanceof ClientAbort) {
          this.complete(leader, request.path, decision.key, { status: 499 });
          throw new ClientGoneError();
        }
        const timeout = (err as { code?: string }).code === "UND_ERR_HEADERS_TIMEOUT";
        answer = await this.orGone(failed(timeout ? 504 : 502), cancel).catch(ended);
        continue;
      }
      const headerMs = Date.now() - sentAt;
      const tap = decision.usage ? new UsageTap() : undefined;
      const sniffer = request.responses ? new ResponseIdSniffer() : undefined;
      let responseId: string | undefined;
      // A whole answer's first byte is its end: the leader sees that in the completion.
      let firstByte = request.stream;
      const headers = responseHeaders(upstream.headers, worker.id, decision.route, decision.id);
      if (this.options.waitHeader !== undefined && decision.wait !== undefined)
        headers[this.options.waitHeader] = decision.wait;
      if (this.options.explainHeader !== undefined && decision.explain !== undefined)
        headers[this.options.explainHeader] = decision.explain;
      const outcome = await stream(upstream, res, cancel, request.startedAt, headers, (chunk) => {
        if (firstByte) {
          firstByte = false;
          this.notify(leader, request.path, "first-byte", decision.key);
        }
        tap?.write(chunk);
        if (sniffer !== undefined) responseId ??= sniffer.write(chunk);
      });
      const usage = tap?.result();
      this.complete(leader, request.path, decision.key, {
        status: outcome.status,
        upstream_status: upstream.statusCode,
        header_ms: headerMs,
        ...(responseId !== undefined ? { response_id: responseId } : {}),
        ...(usage === undefined
          ? {}
          : {
              prompt_tokens: usage.promptTokens,
              cached_tokens: usage.cachedTokens,
              completion_tokens: usage.completionTokens,
            }),
      });
      return { ...outcome, attempts, worker, upstreamStatus: upstream.statusCode };
    }
  }

  /** The worker's headers: the client's as a relay passes them, the decision's values, the worker's key. */
  private workerHeaders(
    request: DecidedRequest,
    decision: Decision,
    worker: Worker,
  ): Record<string, string | string[]> {
    const headers = upstreamRequestHeaders(
      request.headers,
      decision.id,
      this.options.forwardAuthorization,
    );
    delete headers[PEER_SIGNATURE_HEADER];
    delete headers[CALL_HEADER];
    if (decision.via !== undefined) headers.via = decision.via;
    if (decision.traceparent !== undefined) headers.traceparent = decision.traceparent;
    if (decision.tracestate !== undefined) headers.tracestate = decision.tracestate;
    if (decision.rank !== undefined) headers["x-data-parallel-rank"] = decision.rank;
    if (worker.authorization !== undefined) headers.authorization = worker.authorization;
    return headers;
  }

  /** `work`, unless the client leaves first (ClientGoneError). */
  private orGone<T>(work: Promise<T>, cancel: Cancel): Promise<T> {
    return work.catch((err: unknown) => {
      if (cancel.reason instanceof ClientAbort) throw new ClientGoneError();
      throw err;
    });
  }

  /** A call about request `id` whose answer matters (retry, body). */
  private call(
    leader: string,
    path: string,
    call: PeerCall,
    id: string,
    cancel: Cancel,
    body?: string,
    extra?: Record<string, string>,
  ): Promise<UpstreamAnswer> {
    return callUpstream(
      this.agent,
      {
        origin: leader,
        path,
        method: "POST",
        headers: {
          [CALL_HEADER]: call,
          [REQUEST_HEADER]: id,
          [PEER_SIGNATURE_HEADER]: signPeerCall(this.options.secret, call, id),
          ...(body !== undefined ? { "content-type": "application/json" } : {}),
          ...extra,
        },
        body: body ?? null,
      },
      cancel,
    ).catch((err: unknown) => {
      if (cancel.reason instanceof ClientAbort) throw err;
      const reason = err instanceof Error ? err.message : String(err);
      throw new RouterError("upstream_error", `The leader replica failed to answer: ${reason}`);
    });
  }

  /** The leader's rewritten body for the attempt under way. */
  private async fetchBody(
    leader: string,
    path: string,
    id: string,
    cancel: Cancel,
  ): Promise<Buffer> {
    const answer = await this.call(leader, path, "body", id, cancel);
    const chunks: Buffer[] = [];
    let size = 0;
    const body = await new Promise<Buffer>((resolve, reject) => {
      answer.pipeTo({
        onData: (chunk) => {
          size += chunk.length;
          if (size > MAX_FETCHED_BODY) answer.cut();
          else chunks.push(chunk);
        },
        onEnd: () => resolve(Buffer.concat(chunks)),
        onError: reject,
      });
    });
    if (answer.statusCode !== 200)
      throw new RouterError("upstream_error", "The leader replica had no body for the request.");
    return body;
  }

  /** A call whose answer does not matter (first-byte, complete): sent, its answer dropped. */
  private notify(leader: string, path: string, call: PeerCall, id: string, body?: string): void {
    this.call(leader, path, call, id, new Cancel(), body).then(
      (answer) => answer.dump(),
      () => {},
    );
  }

  /** The request's end, for the leader to end its attempt as one of its own. */
  private complete(
    leader: string,
    path: string,
    id: string,
    record: Record<string, unknown>,
  ): void {
    this.notify(leader, path, "complete", id, JSON.stringify(record));
  }
}

/** An answer streamed to the client with back-pressure; resolves once it ended (every path). */
export function stream(
  answer: UpstreamAnswer,
  res: ServerResponse,
  cancel: Cancel,
  startedAt: number,
  headers: OutgoingHttpHeaders,
  onChunk?: (chunk: Buffer) => void,
): Promise<ForwardOutcome> {
  return new Promise((resolve) =>
    new StreamedAnswer(answer, res, cancel, startedAt, headers, onChunk, resolve).start(),
  );
}

/** An answer streamed to the client with back-pressure, ended on every path. */
class StreamedAnswer implements BodySink {
  private ttfbMs: number | undefined;
  private settled = false;
  private readonly status: number;
  private readonly isEventStream: boolean;
  private readonly onClientClose = () => {
    if (this.res.writableFinished) return;
    this.cancel.abort(new ClientAbort());
    this.finish({ status: 499, upstreamStatus: this.status, error: "client_abort" });
  };
  private readonly onDrain = () => this.answer.resume();

  constructor(
    private readonly answer: UpstreamAnswer,
    private readonly res: ServerResponse,
    private readonly cancel: Cancel,
    private readonly startedAt: number,
    private readonly headers: OutgoingHttpHeaders,
    private readonly onChunk: ((chunk: Buffer) => void) | undefined,
    private readonly resolve: (outcome: ForwardOutcome) => void,
  ) {
    this.status = answer.statusCode;
    const contentType = answer.headers["content-type"];
    this.isEventStream =
      typeof contentType === "string" && contentType.startsWith("text/event-stream");
  }

  start(): void {
    this.res.writeHead(this.status, this.headers);
    // A stream's headers go at once: the client sees the 200 while prefill runs.
    if (this.isEventStream) this.res.flushHeaders();
    this.res.on("close", this.onClientClose);
    this.answer.pipeTo(this);
  }

  onData(chunk: Buffer): void {
    this.ttfbMs ??= Date.now() - this.startedAt;
    this.onChunk?.(chunk);
    if (!this.res.write(chunk)) {
      this.answer.pause();
      this.res.once("drain", this.onDrain);
    }
  }

  onEnd(): void {
    this.res.end();
    this.finish({ status: this.status });
  }

  onError(err: Error): void {
    if (this.settled) return;
    // A stream learns in-band that it broke; a cut JSON body must not look complete.
    if (this.isEventStream && !this.res.destroyed) {
      const message = `The answer broke mid-stream: ${err.message}`;
      this.res.end(`data: ${JSON.stringify(errorBody("upstream_error", message))}\n\n`);
    } else this.res.destroy();
    this.finish({ status: this.status, error: "stream" });
  }

  private finish(o: { status: number; upstreamStatus?: number; error?: string }): void {
    if (this.settled) return;
    this.settled = true;
    this.res.off("close", this.onClientClose);
    this.res.off("drain", this.onDrain);
    const outcome: ForwardOutcome = { status: o.status, attempts: 1, branch: "relayed" };
    if (this.ttfbMs !== undefined) outcome.ttfbMs = this.ttfbMs;
    if (o.error !== undefined) outcome.error = o.error;
    if (o.upstreamStatus !== undefined) outcome.upstreamStatus = o.upstreamStatus;
    this.resolve(outcome);
  }
}
