/**
 * Attempts whose bytes another process relays (--data-plane nginx): the forwarder's retry loop,
 * lease and feedback stay here, but instead of calling the worker, an attempt answers the relay's
 * decision call with the worker, the upstream headers and, when the router changes the body, the
 * body; it then waits for how the relay ended:
 * - a completion record (the relay's access log: status, time to the worker's header, the engine's
 *   token counts), which ends the attempt as relay() would have;
 * - or a retry call (the relay could not connect or got no header in time, before any byte reached
 *   the client), which fails the attempt so that the loop chooses again, answering that call.
 * A record that never comes (lost datagram, relay restarted) is expired by the attempt's own
 * --request-timeout-secs timer, or all at once when the relay process dies.
 */
import { randomBytes } from "node:crypto";
import type { ServerResponse } from "node:http";
import { RouterError } from "../errors.js";
import { FAILED, NEUTRAL } from "../workers/lease.js";
import type { Worker } from "../workers/worker.js";
import { ClientAbort } from "./abort-reasons.js";
import type { Attempt } from "./attempt.js";
import type { Cancel } from "./cancel.js";
import { bodyForRank, headersWithRank } from "./dp-rank.js";
import { bodyWithPriority } from "./engine-priority.js";
import type { ForwardRequest } from "./forward-contract.js";
import { withWorkerAuth } from "./headers.js";
import type { AttemptResult, AttemptSender, FirstByteSeen } from "./send-attempt.js";
import type { AttemptFailure } from "./upstream-failure.js";
import type { ReportedUsage } from "./usage-tap.js";
import { writeError } from "./write-error.js";

/** A decision's value, when it has one, added to its list of header names and values. */
function put(
  decision: (string | number)[],
  header: string,
  value: string | string[] | number | undefined,
): void {
  if (value === undefined || value === "") return;
  decision.push(header, Array.isArray(value) ? value.join(", ") : value);
}

/** How the relay ended one request (one access-log line). */
export interface CompletionRecord {
  /** The exchange's key, from its decision (x-rg-key): never the client's request id. */
  readonly key: string;
  /** The status the client got (499: it went away). */
  readonly status: number;
  /** The worker's own status, when one answered. */
  readonly upstreamStatus: number | undefined;
  /** From connecting to the worker to its response header, ms. */
  readonly headerMs: number | undefined;
  readonly usage: ReportedUsage | undefined;
  /** A Responses API answer's id, as the relay read it going by. */
  readonly responseId?: string | undefined;
}

/** The header that marks nginx's calls to the decision endpoint (routes/decision.ts). */
export const CALL_HEADER = "x-radixgate-call";

/**
 * The decision's wire: its values travel as headers beside X-Accel-Redirect, each copied by
 * nginx into its variable where the relay begins (nginx/config.ts).
 */
export const RELAY_VALUES = {
  rg_up: "x-rg-up",
  rg_rid: "x-rg-id",
  /** The exchange's key: what the relay's retry, body and completion name it by. */
  rg_key: "x-rg-key",
  rg_worker: "x-rg-worker",
  rg_route: "x-rg-route",
  rg_auth: "x-rg-auth",
  rg_via: "x-rg-via",
  rg_tp: "x-rg-tp",
  rg_ts: "x-rg-ts",
  rg_rank: "x-rg-rank",
  rg_explain: "x-rg-explain",
  rg_wait: "x-rg-wait",
  /** Where a relay whose body is fetched first (@body) goes on to. */
  rg_next: "x-rg-next",
} as const;

interface Pending {
  readonly attempt: Attempt;
  readonly sentAt: number;
  readonly startedAt: number;
  /** The body radixgate rewrote for this attempt, fetched by the relay (undefined: the client's). */
  readonly body: Buffer | undefined;
  settle(result: AttemptResult): void;
}

/** One request's exchange with the relay: its current call, and the attempt under way. */
interface Exchange {
  /** The relay's call being answered: the first decision call, then each retry call. */
  reply: ServerResponse;
  /** The request's id, for the error bodies answered here. */
  id: string | undefined;
  /**
   * What the relay names the exchange by in its later calls and its record: made here, unique,
   * never the client's request id, which two requests may share (a client retrying with the
   * same X-Request-Id, or one naming another's): a shared id once let one request's body call
   * fetch the other's rewritten body.
   */
  key: string | undefined;
  pending: Pending | undefined;
  lastFailure: AttemptFailure | undefined;
}

export interface RemoteRelayOptions {
  /**
   * Where the relay sends a worker's requests: `http://<name>` of a named upstream with kept-alive
   * connections, or the worker's own origin (one added since the relay started).
   */
  upstreamOrigin(worker: Worker): string;
  /** Whether the relay should read the engine's token counts from the answer. */
  readsUsage: boolean;
  /** --queue-wait-header: its value, set by the pipeline on the call, goes to the relay. */
  waitHeader: string | undefined;
  /**
   * Whether the decision carries the worker's API key (nginx, on its private socket). A replica
   * relaying for the leader has the fleet's workers and their keys itself: none go over its link.
   */
  sendsWorkerAuth: boolean;
  /**
   * How the attempt's first byte is seen: `unseen` (nginx: at the end only) or `reported` (a
   * replica's first-byte call, RemoteRelays.firstByteCame).
   */
  firstByte: "unseen" | "reported";
  /**
   * A Responses answer's id the relay read, with the worker that produced it (ResponseHolders:
   * a follow-up's previous_response_id is routed there).
   */
  onResponseId?: ((responseId: string, worker: Worker) => void) | undefined;
}

export class RemoteRelays implements AttemptSender {
  private readonly byCall = new WeakMap<ServerResponse, Exchange>();
  private readonly byKey = new Map<string, Exchange>();
  /** Keys start with this process's own prefix: a record from before a restart matches nothing. */
  private readonly keyPrefix = randomBytes(6).toString("base64url");
  private keys = 0;

  constructor(private readonly options: RemoteRelayOptions) {}

  /** The relay bounds the worker's first byte itself (nginx's proxy_read_timeout, nginx/config.ts). */
  firstByte(): FirstByteSeen {
    return this.options.firstByte;
  }

  /** Whether `first` is a decision call of this relay's (the pipeline's response to it). */
  has(first: ServerResponse): boolean {
    return this.byCall.has(first);
  }

  /** The relay saw the worker's first byte: the attempt's prefill is over. False when unknown. */
  firstByteCame(key: string): boolean {
    const pending = this.byKey.get(key)?.pending;
    if (pending === undefined) return false;
    pending.attempt.firstByte();
    return true;
  }

  /** Attempts waiting for their relay's end. */
  get pending(): number {
    let n = 0;
    for (const exchange of this.byKey.values()) if (exchange.pending !== undefined) n += 1;
    return n;
  }

  /** A decision call begins: its request's attempts answer `reply` (until a retry call). */
  open(reply: ServerResponse): void {
    this.byCall.set(reply, {
      reply,
      id: undefined,
      key: undefined,
      pending: undefined,
      lastFailure: undefined,
    });
  }

  /**
   * The request's pipeline is over: forget it. A retry call it left unanswered (its attempts ran
   * out) gets the last failure, or 503 when no worker was left to try.
   */
  close(first: ServerResponse): void {
    const exchange = this.byCall.get(first);
    if (exchange === undefined) return;
    this.byCall.delete(first);
    if (exchange.key !== undefined) this.byKey.delete(exchange.key);
    if (exchange.reply === first || exchange.reply.headersSent) return;
    const failure = exchange.lastFailure;
    const error =
      failure === undefined
        ? new RouterError("no_workers_available", "No worker is left to try for this request.")
        : new RouterError(failure.code, failure.message);
    writeError(exchange.reply, error, exchange.id ?? "");
  }

  /**
   * The relay could not reach the worker (`status`: nginx's 502 or 504) before any byte reached
   * the client: the attempt fails, and the loop's next choice answers `reply`. False when the
   * request is not known (anymore).
   */
  retry(key: string, reply: ServerResponse, status: number): boolean {
    const exchange = this.byKey.get(key);
    const pending = exchange?.pending;
    if (exchange === undefined || pending === undefined) return false;
    exchange.reply = reply;
    exchange.pending = undefined;
    const worker = pending.attempt.worker;
    const failure: AttemptFailure =
      status === 504
        ? {
            kind: "timeout",
            retryable: true,
            code: "upstream_timeout",
            message: `Worker ${worker.url} sent no response header in time.`,
          }
        : {
            kind: "connect",
            retryable: true,
            code: "upstream_error",
            message: `Worker ${worker.url} could not be reached.`,
          };
    exchange.lastFailure = failure;
    pending.attempt.end(FAILED);
    pending.settle({ kind: "failed", failure });
    return true;
  }

  /** The rewritten body of the request's attempt under way, for the relay to send. */
  body(key: string): Buffer | undefined {
    return this.byKey.get(key)?.pending?.body;
  }

  /** The relay's record of a request's end: its attempt ends as a relayed answer does. */
  complete(record: CompletionRecord): boolean {
    const exchange = this.byKey.get(record.key);
    const pending = exchange?.pending;
    if (exchange === undefined || pending === undefined) return false;
    exchange.pending = undefined;
    const { attempt } = pending;
    const worker = attempt.worker;
    const upstream = record.upstreamStatus;
    if (upstream !== undefined) attempt.headersArrived(upstream);
    attempt.firstByte();
    const clientGone = record.status === 499;
    attempt.end(
      clientGone || upstream === undefined ? NEUTRAL : { kind: "answered", status: upstream },
    );
    const ttfbMs =
      record.headerMs === undefined
        ? undefined
        : pending.sentAt - pending.startedAt + record.headerMs;
    pending.settle({
      kind: "done",
      outcome: {
        status: record.status,
        worker,
        ...(ttfbMs !== undefined ? { ttfbMs } : {}),
        ...(clientGone ? { error: "client_abort" } : {}),
        ...(upstream !== undefined && upstream !== record.status
          ? { upstreamStatus: upstream }
          : {}),
      },
      ...(record.usage !== undefined ? { usage: record.usage } : {}),
    });
    if (record.responseId !== undefined) this.options.onResponseId?.(record.responseId, worker);
    return true;
  }

  /** The relay process died: none of its records will come. Returns how many were waiting. */
  expireAll(): number {
    let n = 0;
    for (const exchange of this.byKey.values()) {
      const pending = exchange.pending;
      if (pending === undefined) continue;
      exchange.pending = undefined;
      pending.attempt.end(NEUTRAL);
      pending.settle({
        kind: "done",
        outcome: { status: 502, worker: pending.attempt.worker, error: "relay_lost" },
      });
      n += 1;
    }
    return n;
  }

  /**
   * The attempt's decision, sent as the answer to the relay's current call for this request; the
   * promise settles with how the relay ended it. `first` is the request's first decision call
   * (the pipeline's response). The relay itself bounds the first byte and never passes a
   * retryable status back (its 502/504 come back as a retry call), so `canRetry` is not asked;
   * a closed forwarder has already aborted the attempt's controller.
   */
  send(
    attempt: Attempt,
    req: ForwardRequest,
    headers: Record<string, string | string[]>,
    rank: number | undefined,
    first: ServerResponse,
    _canRetry: () => boolean,
    _closed: boolean,
    inProgress: Set<Cancel>,
  ): Promise<AttemptResult> {
    const { worker, controller } = attempt;
    const exchange = this.byCall.get(first);
    const done = (result: AttemptResult) => {
      inProgress.delete(controller);
      return result;
    };
    if (exchange === undefined || exchange.reply.headersSent || exchange.reply.destroyed) {
      attempt.end(NEUTRAL);
      return Promise.resolve(
        done({ kind: "done", outcome: { status: 499, worker, error: "client_abort" } }),
      );
    }
    if (exchange.key === undefined) {
      exchange.id = req.requestId;
      exchange.key = `${this.keyPrefix}.${++this.keys}`;
      this.byKey.set(exchange.key, exchange);
    }
    const upstream = withWorkerAuth(
      headersWithRank(attempt.traced(headers), rank),
      worker.authorization,
    );
    const original = req.routing.body;
    const body = bodyWithPriority(
      bodyForRank(original, req.path, worker.engine, rank),
      worker.engine,
      attempt.enginePriority,
    );
    const origin = this.options.upstreamOrigin(worker);
    // The body filter runs on every chunk: only where the engine's counts can be found.
    const usage =
      (this.options.readsUsage || attempt.readUsage) && req.routing.answerHasUsage !== false;
    const rewritten = body !== undefined && body !== original ? body : undefined;
    const relay = usage ? "@relay_u" : "@relay";
    // An empty answer: nginx keeps the connection for the next call. A flat list of names and
    // values: Node writes it as it is, where an object's keys were set and then walked again.
    const decision: (string | number)[] = [
      "content-length",
      0,
      "x-accel-redirect",
      rewritten === undefined ? relay : "@body",
      RELAY_VALUES.rg_up,
      origin + worker.basePath + req.path,
      RELAY_VALUES.rg_rid,
      req.requestId,
      RELAY_VALUES.rg_worker,
      worker.id,
      RELAY_VALUES.rg_key,
      exchange.key,
    ];
    put(decision, RELAY_VALUES.rg_route, attempt.route);
    if (this.options.sendsWorkerAuth) put(decision, RELAY_VALUES.rg_auth, upstream.authorization);
    put(decision, RELAY_VALUES.rg_via, upstream.via);
    put(decision, RELAY_VALUES.rg_tp, upstream.traceparent);
    put(decision, RELAY_VALUES.rg_ts, upstream.tracestate);
    put(decision, RELAY_VALUES.rg_rank, upstream["x-data-parallel-rank"]);
    put(decision, RELAY_VALUES.rg_explain, attempt.explain?.[1]);
    if (this.options.waitHeader !== undefined)
      put(decision, RELAY_VALUES.rg_wait, exchange.reply.getHeader(this.options.waitHeader));
    if (rewritten !== undefined) put(decision, RELAY_VALUES.rg_next, `${relay}_b`);
    // The relay bounds the first byte itself (its read timeout); here only the overall deadline
    // and a shutdown end the wait.
    attempt.headersArrived();
    return new Promise<AttemptResult>((resolve) => {
      const pending: Pending = {
        attempt,
        sentAt: Date.now(),
        startedAt: req.startedAt,
        body: rewritten,
        settle: (result) => {
          controller.off("abort", onAbort);
          resolve(done(result));
        },
      };
      const onAbort = () => {
        if (exchange.pending !== pending) return;
        exchange.pending = undefined;
        attempt.end(NEUTRAL);
        const reason = controller.reason;
        pending.settle({
          kind: "done",
          outcome: {
            status: reason instanceof ClientAbort ? 499 : 504,
            worker,
            error: reason instanceof ClientAbort ? "client_abort" : "relay_record_lost",
          },
        });
      };
      controller.once("abort", onAbort);
      exchange.pending = pending;
      exchange.reply.writeHead(200, decision);
      exchange.reply.end();
    });
  }
}

/**
 * A leader's attempts (--state-relay decisions): those of a request a replica relays for it (a
 * decide call, `peers.has`) are carried by that replica; the rest by this process.
 */
export class PeerOrOwnAttempts implements AttemptSender {
  constructor(
    readonly peers: RemoteRelays,
    private readonly own: AttemptSender,
  ) {}

  firstByte(res: ServerResponse): FirstByteSeen {
    return this.peers.has(res) ? this.peers.firstByte() : (this.own.firstByte?.(res) ?? "timed");
  }

  send(
    attempt: Attempt,
    req: ForwardRequest,
    headers: Record<string, string | string[]>,
    rank: number | undefined,
    res: ServerResponse,
    canRetry: () => boolean,
    closed: boolean,
    inProgress: Set<Cancel>,
  ): Promise<AttemptResult> {
    const sender = this.peers.has(res) ? this.peers : this.own;
    return sender.send(attempt, req, headers, rank, res, canRetry, closed, inProgress);
  }
}
