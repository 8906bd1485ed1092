import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from "node:http";
import { Agent } from "undici";
import { RouterError } from "../errors.js";
import { ClientAbort } from "./abort-reasons.js";
import { Cancel, ClientGoneError } from "./cancel.js";
import type { ForwardOutcome } from "./forward-contract.js";
import { passedResponseHeaders, upstreamRequestHeaders } from "./headers.js";
import {
  LeaderDecisions,
  type LeaderDecisionsOptions,
  PEER_SIGNATURE_HEADER,
  signPeerCall,
  stream,
} from "./leader-decisions.js";
import { CALL_HEADER } from "./remote-relay.js";
import type { RoutingRequest } from "./routing-request.js";
import type { UpstreamAnswer } from "./upstream-call.js";
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
  /**
   * --state-relay: `all` relays every request, `new-prefixes` only those that would claim;
   * `decisions` asks the leader where every request goes and carries it there from here.
   */
  readonly mode: "new-prefixes" | "all" | "decisions";
  /** With mode `decisions`: what following the leader's decisions needs. */
  readonly decisions?: LeaderDecisionsOptions | undefined;
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
  /** Whether the answer streams (mode `decisions`: the worker's first-byte bound). */
  readonly stream: boolean;
  /** A Responses API request (mode `decisions`: its answer's id goes to the leader). */
  readonly responses: boolean;
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
  private readonly decisions: LeaderDecisions | undefined;
  private pausedUntil = 0;

  constructor(private readonly options: LeaderRelayOptions) {
    this.agent = new Agent({
      connect: { timeout: Math.max(1, Math.min(options.connectTimeoutMs, options.timeoutMs)) },
      // The leader bounds the time to its answer's headers itself (its first-byte limits); this
      // is only for a leader that stopped after saying it had the request.
      headersTimeout: options.requestTimeoutMs,
      bodyTimeout: options.idleTimeoutMs,
    });
    if (options.mode === "decisions") {
      if (options.decisions === undefined)
        throw new Error("--state-relay decisions needs its options");
      this.decisions = new LeaderDecisions(options.decisions, this.agent);
    }
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
    return this.options.mode !== "new-prefixes" || this.options.wouldClaim(routing)
      ? url
      : undefined;
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
    const decisions = this.options.decisions;
    if (decisions !== undefined) {
      headers[CALL_HEADER] = "decide";
      headers[PEER_SIGNATURE_HEADER] = signPeerCall(decisions.secret, "decide", request.requestId);
    }
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
      if (this.decisions === undefined)
        return await stream(
          answer,
          res,
          cancel,
          request.startedAt,
          passedResponseHeaders(answer.headers),
        );
      return await this.decisions.follow(
        leader,
        answer,
        {
          path: incoming.url ?? "/",
          headers: incoming.headers,
          body: request.body,
          requestId: request.requestId,
          startedAt: request.startedAt,
          stream: request.stream,
          responses: request.responses,
        },
        res,
        cancel,
      );
    } catch (err) {
      if (err instanceof ClientGoneError) throw err;
      if (res.headersSent) {
        res.destroy();
        return { status: 502, attempts: 1, branch: "relayed", error: "stream" };
      }
      return this.brokenBeforeAnswer(res, request.requestId, err);
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
