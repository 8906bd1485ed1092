import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from "node:http";
import { Agent } from "undici";
import { errorBody, RouterError } from "../errors.js";
import { ClientAbort } from "./abort-reasons.js";
import { Cancel, ClientGoneError } from "./cancel.js";
import type { ForwardOutcome } from "./forward-contract.js";
import { passedResponseHeaders, upstreamRequestHeaders } from "./headers.js";
import type { RoutingRequest } from "./routing-request.js";
import type { BodySink, UpstreamAnswer } from "./upstream-call.js";
import { callUpstream } from "./upstream-call.js";
import { writeError } from "./write-error.js";

/**
 * Marks a request relayed by a peer: it is decided where it lands, never relayed again. A client
 * that sends it itself only keeps its own request from being relayed (it is then decided where it
 * arrived, with a claim, as without relaying): harmless, so it is not refused.
 */
export const RELAYED_HEADER = "x-radixgate-relayed";

/** How long relaying pauses after a relay that failed (a dead leader costs one wait, not one per request). */
const PAUSE_AFTER_FAILURE_MS = 1000;

export interface LeaderRelayOptions {
  /**
   * The leader's URL while this replica relays to it (it and the leader both advertise a URL, and
   * the leader is another replica); undefined = decide here.
   */
  readonly leaderUrl: () => string | undefined;
  /** --state-relay: `all` relays every request, `new-prefixes` only those that would claim. */
  readonly mode: "new-prefixes" | "all";
  /** Whether this request would claim its prefix (Scheduler.wouldClaim, on the index as it is now). */
  readonly wouldClaim: (routing: RoutingRequest) => boolean;
  /** --state-relay-timeout-ms: how long the leader may take to say it has the request. */
  readonly timeoutMs: number;
  /** --idle-timeout-secs: the leader's silence between two chunks of its answer. */
  readonly idleTimeoutMs: number;
  /** --request-timeout-secs: the longest the leader may take to its answer's headers. */
  readonly requestTimeoutMs: number;
  /** --connect-timeout (ms), bounded by timeoutMs anyway. */
  readonly connectTimeoutMs: number;
  /** This router's Via entry (proxy/headers.ts viaToken). */
  readonly via: string;
  /** Each relay's outcome: relayed (the leader took it) or fallback (decided here). */
  readonly onOutcome?: (outcome: "relayed" | "fallback") => void;
}

/** What the relay needs of a received request. */
export interface RelayedRequest {
  readonly incoming: IncomingMessage;
  /** The body as the client sent it (already read). */
  readonly body: Buffer | undefined;
  readonly requestId: string;
  /** When it arrived (epoch ms): its time to first byte counts from then. */
  readonly startedAt: number;
  /** The client's signal: the client gone, the relay ends and the leader's request with it. */
  readonly client: Cancel;
}

/** The leader did not say it had the request within the bound. */
class LeaderSilent extends Error {
  constructor() {
    super("the leader replica did not answer in time");
  }
}

/**
 * One decider for new prefixes (or for every request, --state-relay all), by relaying the request
 * itself: a replica that would claim a new prefix sends the whole HTTP request (method, path, the body it read, the client's headers minus
 * hop-by-hop ones) to the leader replica and streams the leader's answer back. The leader runs it
 * as a request of its own: its admission, its scheduler on its own tree, its lease and counts
 * until the end, its op published at once (docs/benchmarks.md, "New prefixes relayed to the
 * leader"). This replica does no admission, lease or cache account for it.
 *
 * Safe to fall back until the leader says it has the request (an interim 102, or its answer's
 * headers): a connect error, a refusal or silence past the bound, and the request is decided here
 * as before; nothing reached the client. After that there is no fallback: an error ends the
 * client's response as the forwarder ends one whose worker broke.
 */
export class LeaderRelay {
  private readonly agent: Agent;
  private pausedUntil = 0;

  constructor(private readonly options: LeaderRelayOptions) {
    this.agent = new Agent({
      connect: { timeout: Math.max(1, Math.min(options.connectTimeoutMs, options.timeoutMs)) },
      // The leader bounds the time to its answer's headers itself (its first-byte limits); this
      // is only for a leader that stopped after saying it had the request.
      headersTimeout: options.requestTimeoutMs,
      bodyTimeout: options.idleTimeoutMs,
    });
  }

  /**
   * The leader's URL when this request goes there; undefined = decide it here. Whatever the mode,
   * a request already relayed, or one of the precise index (its tokenizing comes first, and its
   * picture is the engines' own KV events), stays here.
   */
  target(headers: IncomingHttpHeaders, routing: RoutingRequest): string | undefined {
    if (headers[RELAYED_HEADER] !== undefined || Date.now() < this.pausedUntil) return undefined;
    if (routing.tokenizeInput !== undefined) return undefined;
    const url = this.options.leaderUrl();
    if (url === undefined) return undefined;
    return this.options.mode === "all" || this.options.wouldClaim(routing) ? url : undefined;
  }

  /**
   * Relays the request to `leader` and streams its answer to `res`. Resolves with the outcome once
   * the answer ended, or undefined when it fell back before the leader took the request (decide it
   * here). Rejects with ClientGoneError when the client left before anything was sent to it.
   */
  async send(
    leader: string,
    request: RelayedRequest,
    res: ServerResponse,
  ): Promise<ForwardOutcome | undefined> {
    const { incoming, client } = request;
    if (client.aborted) throw new ClientGoneError();
    // The relay's own signal: a timeout here must not read as the client gone to a fallback.
    const cancel = new Cancel();
    const clientGone = () => cancel.abort(new ClientAbort());
    client.once("abort", clientGone);
    const headers = upstreamRequestHeaders(
      incoming.headers,
      request.requestId,
      true,
      this.options.via,
    );
    headers[RELAYED_HEADER] = "1";
    let taken = false;
    const timer = setTimeout(() => {
      if (!taken) cancel.abort(new LeaderSilent());
    }, this.options.timeoutMs);
    let answer: UpstreamAnswer;
    try {
      answer = await callUpstream(
        this.agent,
        {
          origin: leader,
          path: incoming.url ?? "/",
          method: "POST", // the relay stage sees only the data plane's POSTs with a body
          headers,
          body: request.body ?? null,
        },
        cancel,
        () => {
          taken = true;
          clearTimeout(timer);
        },
      );
    } catch (err) {
      clearTimeout(timer);
      client.off("abort", clientGone);
      if (cancel.reason instanceof ClientAbort) throw new ClientGoneError();
      if (taken) return this.brokenBeforeAnswer(res, request.requestId, err);
      this.pausedUntil = Date.now() + PAUSE_AFTER_FAILURE_MS;
      this.options.onOutcome?.("fallback");
      return undefined;
    }
    clearTimeout(timer);
    this.options.onOutcome?.("relayed");
    try {
      return await new Promise((resolve) =>
        new RelayedAnswer(answer, res, cancel, request.startedAt, resolve).start(),
      );
    } finally {
      client.off("abort", clientGone);
    }
  }

  /** The leader had the request, then failed before answering: a 502, no fallback (it may run). */
  private brokenBeforeAnswer(res: ServerResponse, requestId: string, err: unknown): ForwardOutcome {
    this.options.onOutcome?.("relayed");
    const reason = err instanceof Error ? err.message : String(err);
    const error = new RouterError(
      "upstream_error",
      `The leader replica failed to answer: ${reason}`,
    );
    writeError(res, error, requestId);
    return { status: error.status, attempts: 1, branch: "relayed", error: error.code };
  }

  /** Drops the pooled connections to the leader. */
  async close(): Promise<void> {
    await this.agent.close().catch(() => {});
  }
}

/** The leader's answer streamed to the client with back-pressure, ended on every path. */
class RelayedAnswer implements BodySink {
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
    private readonly resolve: (outcome: ForwardOutcome) => void,
  ) {
    this.status = answer.statusCode;
    const contentType = answer.headers["content-type"];
    this.isEventStream =
      typeof contentType === "string" && contentType.startsWith("text/event-stream");
  }

  start(): void {
    this.res.writeHead(this.status, passedResponseHeaders(this.answer.headers));
    // A stream's headers go at once, as the leader sent them: the client sees the 200 while
    // prefill runs.
    if (this.isEventStream) this.res.flushHeaders();
    this.res.on("close", this.onClientClose);
    this.answer.pipeTo(this);
  }

  onData(chunk: Buffer): void {
    this.ttfbMs ??= Date.now() - this.startedAt;
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
      const message = `The leader replica's answer broke mid-stream: ${err.message}`;
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
