import type { ServerResponse } from "node:http";
import type { CacheLedger } from "../cache-account/cache-ledger.js";
import type { RequestAccount } from "../cache-account/request-account.js";
import { RouterError, retryAfterSecs } from "../errors.js";
import type { AttemptEnd, Decision, Scheduler } from "../scheduling/scheduler.js";
import type { DecisionSpan } from "../tracing/request-trace.js";
import type { WorkerRegistry } from "../workers/registry.js";
import type { ModelPlan } from "../workers/served-models.js";
import type { Worker } from "../workers/worker.js";
import { ShutdownAbort } from "./abort-reasons.js";
import { Attempt, type RelayLimits } from "./attempt.js";
import { backoffMs, sleep } from "./backoff.js";
import type { Cancel } from "./cancel.js";
import { rankToSend } from "./dp-rank.js";
import { prioritySent } from "./engine-priority.js";
import {
  accepted,
  type ForwardHooks,
  type ForwardOutcome,
  type ForwardRequest,
} from "./forward-contract.js";
import { upstreamRequestHeaders, viaToken, withWorkerAuth } from "./headers.js";
import { IdleSweep } from "./idle-sweep.js";
import {
  attemptsOutcome,
  noWorkerMessage,
  refusal,
  shortestCoolDown,
} from "./no-worker-answers.js";
import type { PairProtocol, PairResult, PairTry, PairView, Side } from "./pair.js";
import { routeHeader } from "./route-header.js";
import type { AttemptResult, AttemptSender, FirstByteSeen } from "./send-attempt.js";
import type { ForwardSettings } from "./settings.js";
import type { AttemptFailure } from "./upstream-failure.js";
import type { ReportedUsage } from "./usage-tap.js";
import { writeError } from "./write-error.js";

// The forwarder's contract lives in forward-contract.ts, its options type beside the proxy
// section's rows (settings.ts); importers keep finding them here.
export type { ForwardHooks, ForwardOutcome, ForwardRequest } from "./forward-contract.js";
export type { ForwardSettings };

/**
 * Prefill/decode disaggregation as the forwarder runs it: the decode side's decider (the
 * router's own picks the prefill side, where the prefix cache is) and the engines' protocol
 * (disaggregation/), which sends the pair with the hand-off's body rewrites.
 */
export interface PairProfile {
  readonly decodeDecider: Scheduler;
  readonly protocol: PairProtocol;
}

/** One attempt's choice: a worker, or a prefill/decode pair (`decision` is then the prefill's). */
interface Choice {
  readonly decision: Decision<Worker>;
  readonly decode?: Decision<Worker> | undefined;
}

/**
 * How one attempt ended: answered (or being answered), or failed before any byte, on `failed`
 * (a pair: the sides that failed; one worker's attempt: that worker).
 */
type Tried =
  | {
      kind: "done";
      outcome: Omit<ForwardOutcome, "attempts">;
      usage?: ReportedUsage | undefined;
      /** What the accounted worker reported of the prompt (a pair: the prefill side's answer). */
      accountUsage?: ReportedUsage | undefined;
    }
  | { kind: "failed"; failure: AttemptFailure; failed?: readonly Worker[] };

const NO_WORKERS: readonly Worker[] = [];

/**
 * The outcome of an answered attempt, in one literal of one shape (every request ends here, so
 * no spread copies): the answer's facts, the decision's, and the cache account when one was kept.
 */
function answered(
  result: Extract<Tried, { kind: "done" }>,
  decision: Decision<Worker>,
  attempts: number,
  account: RequestAccount | undefined,
): ForwardOutcome {
  const o = result.outcome;
  return {
    status: o.status,
    worker: o.worker ?? decision.worker,
    branch: o.branch ?? decision.branch,
    matchRate: o.matchRate !== undefined ? o.matchRate : decision.matchRate,
    index: o.index !== undefined ? o.index : decision.index,
    attempts,
    ttfbMs: o.ttfbMs,
    error: o.error,
    upstreamStatus: o.upstreamStatus,
    account: account ?? o.account,
    prefillWorker: o.prefillWorker,
    usage: result.usage,
  };
}

/**
 * Sends one request to a worker (or a prefill/decode pair) chosen by the policy and streams the
 * answer back unbuffered. The one retry loop: retries go to workers not yet tried, only before
 * anything reached the client, and only for failures that are safe to repeat.
 */
export class Forwarder {
  /** Upstream requests under way, so a shutdown that runs out of grace can end them cleanly. */
  private readonly inProgress = new Set<Cancel>();
  /** Set by abortAll: an attempt that starts afterwards (a retry after its backoff) ends at once. */
  private closed = false;
  /** The relay's limits, the same for every attempt: made once, not per request. */
  private readonly relayLimits: RelayLimits;
  /** This router's Via entry (loop detection), the same for every request. */
  private readonly via: string;
  /** The scheduler's policy name (metrics, traces) and its label in x-radixgate-route. */
  private readonly policyName: string;
  private readonly profile: string | undefined;
  /** Whether answers are read for the usage their engines report (the scheduler learns from it). */
  private readonly readsUsage: boolean;

  constructor(
    private readonly registry: WorkerRegistry,
    private readonly decider: Scheduler,
    private readonly settings: ForwardSettings,
    private readonly hooks: ForwardHooks,
    /** Who carries each attempt: this process, or nginx told where (--data-plane, at assembly). */
    private readonly sender: AttemptSender,
    /** Each request's cache account (available, chosen, reported cached tokens). */
    private readonly ledger?: CacheLedger,
    /** Prefill/decode disaggregation: each request goes to a pair (undefined: to one worker). */
    readonly pairs?: PairProfile,
  ) {
    this.relayLimits = {
      idleTimeoutMs: settings.idleTimeoutMs,
      clientStallMs: settings.clientStallMs,
      // --idle-timeout-secs for every open relay, one timer for all (idle-sweep.ts).
      idle: new IdleSweep(settings.idleTimeoutMs),
    };
    this.via = viaToken(settings.instanceId);
    this.policyName = decider.policy.name;
    this.profile = decider.profile;
    this.readsUsage = decider.readsUsage;
  }

  /** Ends every upstream request under way (shutdown grace over): streams get an SSE error event. */
  abortAll(): number {
    this.closed = true;
    for (const controller of this.inProgress) controller.abort(new ShutdownAbort());
    return this.inProgress.size;
  }

  async forward(req: ForwardRequest, res: ServerResponse): Promise<ForwardOutcome> {
    const deadline = req.startedAt + this.settings.requestTimeoutMs;
    const tried = new Set<Worker>();
    const via = this.via;
    const refused = refusal(req, via, this.registry, this.settings.modelRouting);
    if (refused !== undefined) {
      writeError(res, refused.error, req.requestId);
      return { status: refused.error.status, attempts: 0, error: refused.kind };
    }
    // The request's facts (text, index key, session, model plan) come ready from intake/.
    const routed = req.routing;
    const plan = routed.plan;
    const pairs = this.pairs;
    // A pair's body is rewritten for the hand-off: what the pair needs of it came from intake's
    // parse (RoutingRequest.pair), refusal included.
    const view = pairs === undefined ? undefined : routed.pair;
    const bytes = routed.body;
    if (pairs !== undefined && (view === undefined || bytes === undefined)) {
      const error = new RouterError(
        "invalid_request",
        "Prefill/decode disaggregation needs a JSON object body (the router adds the hand-off fields to it).",
      );
      writeError(res, error, req.requestId);
      return { status: error.status, attempts: 0, error: "invalid_request" };
    }
    if (view?.refusal !== undefined) {
      const error = new RouterError("invalid_request", view.refusal);
      writeError(res, error, req.requestId);
      return { status: error.status, attempts: 0, error: "invalid_request" };
    }
    const json = view === undefined || bytes === undefined ? undefined : { view, bytes };
    const headers = upstreamRequestHeaders(
      req.headers,
      req.requestId,
      this.settings.forwardAuthorization,
      via,
    );
    let lastFailure: AttemptFailure | undefined;
    let attempts = 0;
    let account: RequestAccount | undefined;

    while (attempts < this.settings.retryMaxAttempts) {
      if (req.clientSignal.aborted) return { status: 499, attempts, error: "client_abort" };
      const choosing = this.choose(req, attempts, tried);
      const choice = choosing instanceof Promise ? await choosing : choosing;
      if (choice === undefined) break;
      const { decision } = choice;
      this.hooks.onDecision(this.policyName, decision.branch, decision.matchRate);
      const worker = decision.worker;
      // The request's cache account, and the --explain-header sent with the answer.
      let explain: readonly [string, string] | undefined;
      if (decision.index !== null && this.ledger !== undefined) {
        ({ account, explain } = this.ledger.decided(account, routed, decision));
      }
      if (pairs === undefined) tried.add(worker);
      attempts += 1;
      // On the last possible attempt a retryable answer is passed through as the worker sent it.
      const tries = attempts;
      const canRetry = (failed: readonly Worker[]) =>
        tries < this.settings.retryMaxAttempts && this.left(tried, plan, failed);
      const route = routeHeader(
        decision.branch,
        req.showMatch === true ? decision.matchRate : null,
        decision.index,
        this.profile,
      );
      const result: Tried =
        choice.decode === undefined || pairs === undefined || json === undefined
          ? await this.single(worker, decision, req, headers, deadline, res, route, explain, () =>
              canRetry([worker]),
            )
          : await this.pair(pairs, choice.decode, decision, req, json, headers, deadline, res, {
              route: `${route};prefill=${worker.id}`,
              explain,
              canRetry,
            });
      if (result.kind === "done") {
        // Only what a worker accepted stays in its index entry: an error answer, or a client gone
        // before the answer began, caches nothing there. Accepted, the engine's usage teaches the
        // scheduler (a pair's prefill side reports its own answer's usage only to the account).
        if (!accepted(result.outcome)) {
          this.completed(choice, routed, { accepted: false });
          return answered(result, decision, attempts, undefined);
        }
        const charsPerToken = this.completed(choice, routed, {
          accepted: true,
          usage: pairs === undefined ? result.usage : undefined,
          aboutText: routed.usageDescribesText,
        });
        if (account === undefined) return answered(result, decision, attempts, undefined);
        const reported = pairs === undefined ? result.usage : result.accountUsage;
        // A batch's usage is the sum over its prompts, not this text's: counted from the text then.
        const usage = routed.usageDescribesText ? reported : undefined;
        this.ledger?.settle(account, usage, charsPerToken, req.requestId);
        return answered(result, decision, attempts, account);
      }
      this.completed(choice, routed, { accepted: false });
      lastFailure = result.failure;
      for (const failed of result.failed ?? [worker]) {
        tried.add(failed);
        this.hooks.onUpstreamError(failed, result.failure.kind);
      }
      if (!result.failure.retryable) break;
      const remaining = deadline - Date.now();
      // A Retry-After holds back the worker that sent it (its cool-down), not the retry to another.
      const delay = backoffMs(
        attempts,
        this.settings.retryInitialBackoffMs,
        this.settings.retryMaxBackoffMs,
      );
      if (attempts >= this.settings.retryMaxAttempts || delay >= remaining) break;
      if (!this.left(tried, plan, NO_WORKERS)) break;
      this.hooks.onRetry(routed.endpoint);
      await sleep(delay, req.clientSignal);
    }

    const ended = attemptsOutcome(req, res, attempts, lastFailure);
    if (ended) return ended;
    if (pairs !== undefined) {
      const error = new RouterError("no_workers_available", this.noPairMessage(tried));
      writeError(res, error, req.requestId);
      return { status: error.status, attempts, error: "no_workers" };
    }
    const coolDownMs = shortestCoolDown(this.registry);
    const error = new RouterError(
      "no_workers_available",
      noWorkerMessage(this.registry, routed.requested, plan),
    );
    // Every worker that could take it asked for a pause: say when to come back.
    const extra: Record<string, string> =
      coolDownMs > 0 ? { "retry-after": String(retryAfterSecs(coolDownMs)) } : {};
    writeError(res, error, req.requestId, extra);
    return { status: error.status, attempts, error: "no_workers" };
  }

  /**
   * Whether a worker (a pair: one of each side) is left to retry on once `tried` and `failed`
   * are left out. A method, not a closure made per request: it is asked only after a failure.
   */
  private left(tried: ReadonlySet<Worker>, plan: ModelPlan, failed: readonly Worker[]): boolean {
    if (this.pairs === undefined)
      return this.registry.candidates(tried, undefined, plan).some((w) => !failed.includes(w));
    return (
      this.registry.candidates(tried, "prefill", plan).some((w) => !failed.includes(w)) &&
      this.registry.candidates(tried, "decode", plan).some((w) => !failed.includes(w))
    );
  }

  /**
   * The attempt's worker, or pair, in one call to the scheduler (a pair: one to each side's): the
   * first attempt among the workers where the request has room (--queue-when-saturated, when any
   * is left) and, for a new prefix, as the replicas agree. A promise only when something is
   * waited for (the index's asynchronous step, the replicas).
   */
  private choose(
    req: ForwardRequest,
    attempts: number,
    tried: ReadonlySet<Worker>,
  ): Choice | undefined | Promise<Choice | undefined> {
    const routed = req.routing;
    const pairs = this.pairs;
    // The room rule on the first attempt only: a retry goes wherever a worker is left.
    const room = attempts === 0 ? req.roomOn : undefined;
    // A pair needs both sides: none is chosen while one side has no worker left.
    if (pairs !== undefined && this.registry.candidates(tried, "decode", routed.plan).length === 0)
      return undefined;
    const trace = req.trace;
    const deciding = trace?.decision();
    const choosing = this.decider.schedule(routed, {
      exclude: tried,
      side: pairs === undefined ? undefined : "prefill",
      first: attempts === 0,
      room,
      span: trace === undefined ? undefined : (name) => trace.phase(name),
      priority: req.priority,
    });
    if (choosing instanceof Promise)
      return choosing.then((decision) => this.chosen(routed, tried, room, deciding, decision));
    return this.chosen(routed, tried, room, deciding, choosing);
  }

  /**
   * The attempt's choice once its worker is decided (a method, so the usual synchronous decision
   * makes no closure): a pair's decode side is then chosen, and a pair that cannot be made takes
   * its prefill side's insert back.
   */
  private chosen(
    routed: ForwardRequest["routing"],
    tried: ReadonlySet<Worker>,
    room: ForwardRequest["roomOn"],
    deciding: DecisionSpan | undefined,
    decision: Decision<Worker> | undefined,
  ): Choice | undefined {
    deciding?.end(this.policyName, decision);
    const pairs = this.pairs;
    if (pairs === undefined) return decision && { decision };
    if (decision === undefined) return undefined;
    const decode = pairs.decodeDecider.schedule(routed, {
      exclude: tried,
      side: "decode",
      first: false,
      room,
    });
    // Only the first attempt waits for anything, and the decode side never asks the replicas.
    if (decode === undefined || decode instanceof Promise) {
      this.decider.completed(decision, routed, { accepted: false });
      return undefined;
    }
    return { decision, decode };
  }

  /**
   * The complete stage of an attempt for the scheduler (a pair: both sides'): the insert taken
   * back when not accepted, the engine's usage learned when accepted. Returns the accounted
   * worker's characters per token.
   */
  private completed(choice: Choice, routed: ForwardRequest["routing"], end: AttemptEnd): number {
    if (choice.decode !== undefined && !end.accepted)
      this.pairs?.decodeDecider.completed(choice.decode, routed, end);
    return this.decider.completed(choice.decision, routed, end);
  }

  /** One try against one worker. Either the response was (or is being) sent, or it failed before any byte. */
  private single(
    worker: Worker,
    decision: Decision<Worker>,
    req: ForwardRequest,
    headers: Record<string, string | string[]>,
    deadline: number,
    res: ServerResponse,
    /** The x-radixgate-route header: branch, match rate, and the index when not the trees. */
    route: string,
    /** The --explain-header for this worker's answer (the cache account's, as decided). */
    explain: readonly [string, string] | undefined,
    canRetry: () => boolean,
  ): Promise<AttemptResult> {
    const routed = req.routing;
    // The data-parallel rank whose cache the index chose, unless the client pinned one itself.
    const rank = rankToSend(decision.rank, req.headers, routed.body);
    const uncachedChars = Math.max(0, routed.text.length - decision.heldBefore);
    const attempt = this.open(worker, req, deadline, route, {
      uncachedChars,
      rank,
      stream: routed.stream,
      firstByte: this.sender.firstByte?.(res) ?? "timed",
      // Not searched where the engine sends no counts (a stream without include_usage).
      readUsage: this.readsUsage && req.method === "POST" && routed.answerHasUsage !== false,
      onAnswerChunk: req.onAnswerChunk,
      explain,
      trace: req.trace?.attempt(worker),
    });
    return this.sender.send(
      attempt,
      req,
      headers,
      rank,
      res,
      canRetry,
      this.closed,
      this.inProgress,
    );
  }

  /**
   * One try of a prefill/decode pair in its engines' protocol: the prefill side's choice is the
   * accounted one (the prefix cache is there), the decode side's answer the one the client gets.
   */
  private async pair(
    pairs: PairProfile,
    d: Decision<Worker>,
    p: Decision<Worker>,
    req: ForwardRequest,
    body: { view: PairView; bytes: Buffer },
    headers: Record<string, string | string[]>,
    deadline: number,
    res: ServerResponse,
    how: {
      route: string;
      /** The --explain-header, sent with the decode side's answer (the one the client gets). */
      explain: readonly [string, string] | undefined;
      canRetry: (failed: readonly Worker[]) => boolean;
    },
  ): Promise<Tried> {
    const routed = req.routing;
    const text = routed.text;
    const controllers: Cancel[] = [];
    // Controllers whose side goes on after the try (a prefill answer read to its end).
    const backgrounded = new Set<Cancel>();
    const t: PairTry = {
      req,
      res,
      view: body.view,
      bytes: body.bytes,
      prefill: p.worker,
      decode: d.worker,
      headersFor: (worker) => withWorkerAuth(headers, worker.authorization),
      open: (worker, side) => {
        const attempt = this.open(worker, req, deadline, how.route, {
          // The prefill side computes what it does not hold; the decode side holds the sequence.
          uncachedChars: side === "prefill" ? Math.max(0, text.length - p.heldBefore) : 0,
          rank: undefined,
          stream: routed.stream && (side === "decode" || pairs.protocol.prefillStreams),
          // A pair's sides are called from here, whatever the data plane.
          firstByte: "timed",
          // The decode side's answer is the one the client gets, and it reports the whole
          // request's tokens (the prompt and all generated): what a tenant quota charges.
          readUsage: side === "decode" && req.method === "POST",
          explain: side === "decode" ? how.explain : undefined,
          trace: req.trace?.attempt(worker, side),
        });
        controllers.push(attempt.controller);
        return attempt;
      },
      canRetry: (side) => how.canRetry([side === "prefill" ? p.worker : d.worker]),
      track: (attempt, work) => {
        backgrounded.add(attempt.controller);
        void work.finally(() => this.inProgress.delete(attempt.controller));
      },
    };
    let result: PairResult;
    try {
      result = await pairs.protocol.exchange(t);
    } finally {
      for (const c of controllers) if (!backgrounded.has(c)) this.inProgress.delete(c);
    }
    if (result.kind === "failed") {
      const failed = [...result.failed].map((side) => (side === "prefill" ? p.worker : d.worker));
      return { kind: "failed", failure: result.failure, failed };
    }
    return {
      kind: "done",
      outcome: { ...result.outcome, worker: result.outcome.worker ?? d.worker },
      usage: result.outcome.usage,
      accountUsage: result.prefillUsage,
    };
  }

  /** Starts an attempt on a worker: its lease (load, engine priority), its timers, the shutdown watch. */
  private open(
    worker: Worker,
    req: ForwardRequest,
    deadline: number,
    route: string,
    how: {
      /** Characters of the text the worker probably has to prefill (not held before). */
      uncachedChars: number;
      /** The engine's data-parallel rank the request goes to, when the router chose one. */
      rank: number | undefined;
      /** Whether this worker's answer streams (its first-byte limit is the streaming one). */
      stream: boolean;
      /** Who sees the first byte (AttemptSender.firstByte): only `timed` sets a timer here. */
      firstByte: FirstByteSeen;
      readUsage: boolean;
      /** Shown each chunk of a successful answer (ForwardRequest.onAnswerChunk). */
      onAnswerChunk?: ForwardRequest["onAnswerChunk"];
      explain: readonly [string, string] | undefined;
      trace: ReturnType<NonNullable<ForwardRequest["trace"]>["attempt"]> | undefined;
    },
  ): Attempt {
    const routed = req.routing;
    // The priority its engine gets: in the body sent and, until the attempt ends, in the worker's
    // tally. Worked out once here (a search of the body), not again for the body.
    const priority = prioritySent(routed.body, req.path, worker.engine, req.priority);
    const attempt = new Attempt({
      worker,
      load: {
        textChars: routed.text.length,
        uncachedChars: how.uncachedChars,
        rank: how.rank,
        enginePriority: priority,
        firstByteVisible: how.stream && how.firstByte !== "unseen",
      },
      requestId: req.requestId,
      startedAt: req.startedAt,
      deadline,
      firstByteMs:
        how.firstByte !== "timed"
          ? undefined
          : how.stream
            ? this.settings.streamFirstByteTimeoutMs
            : this.settings.firstByteTimeoutMs,
      stream: routed.stream,
      clientSignal: req.clientSignal,
      route,
      limits: this.relayLimits,
      readUsage: how.readUsage,
      onAnswerChunk: how.onAnswerChunk,
      explain: how.explain,
      onUpstreamError: this.hooks.onUpstreamError,
      trace: how.trace,
    });
    if (this.closed) attempt.controller.abort(new ShutdownAbort());
    this.inProgress.add(attempt.controller);
    return attempt;
  }

  /** The 503's message: which side has no worker to take the request. */
  private noPairMessage(tried: ReadonlySet<Worker>): string {
    const count = (side: Side) => this.registry.candidates(undefined, side).length;
    const total = (side: Side) => this.registry.list().filter((w) => w.role.type === side).length;
    const triedOn = (side: Side) => [...tried].filter((w) => w.role.type === side).length;
    const sides = (["prefill", "decode"] as const)
      .filter((side) => count(side) === 0 || triedOn(side) >= count(side))
      .map((side) => `${side} (${count(side)} of ${total(side)} available)`);
    return `No prefill/decode pair can take the request: no ${sides.join(" and no ")} worker left to try (unhealthy, circuit open, cooling down, or not serving the model). Add workers with --prefill/--decode or POST /workers with a worker_type.`;
  }
}
