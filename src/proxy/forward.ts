import type { ServerResponse } from "node:http";
import type { CacheLedger } from "../cache-account/cache-ledger.js";
import type { RequestAccount } from "../cache-account/request-account.js";
import { RouterError, retryAfterSecs } from "../errors.js";
import type { Scheduler } from "../scheduling/scheduler.js";
import type { WorkerRegistry } from "../workers/registry.js";
import { admitted } from "../workers/served-models.js";
import type { Worker } from "../workers/worker.js";
import { ShutdownAbort } from "./abort-reasons.js";
import { explainHeader, settleAccount } from "./account-settle.js";
import { Attempt, type RelayLimits } from "./attempt.js";
import { attemptsOutcome } from "./attempts-outcome.js";
import { backoffMs, sleep } from "./backoff.js";
import type { Cancel } from "./cancel.js";
import { rankToSend } from "./dp-rank.js";
import { prioritySent } from "./engine-priority.js";
import {
  accepted,
  type ForwardHooks,
  type ForwardOutcome,
  type ForwardRequest,
  type RequestForwarder,
} from "./forward-contract.js";
import { upstreamRequestHeaders, viaToken } from "./headers.js";
import { IdleSweep } from "./idle-sweep.js";
import { noWorkerMessage, refusal, shortestCoolDown } from "./no-worker-answers.js";
import { routeHeader } from "./route-header.js";
import { type AttemptResult, sendAttempt } from "./send-attempt.js";
import type { ForwardSettings } from "./settings.js";
import type { AttemptFailure } from "./upstream-failure.js";
import type { UsageFeedback } from "./usage-feedback.js";
import { writeError } from "./write-error.js";

// The forwarder's contract lives in forward-contract.ts, its options type beside the proxy
// section's rows (settings.ts); importers keep finding them here.
export type {
  ForwardHooks,
  ForwardOutcome,
  ForwardRequest,
  RequestForwarder,
} from "./forward-contract.js";
export type { ForwardSettings };

/**
 * Sends one request to a worker chosen by the policy and streams the answer back unbuffered.
 * Retries go to workers not yet tried, only before anything reached the client, and only for
 * failures that are safe to repeat.
 */
export class Forwarder implements RequestForwarder {
  /** Upstream requests under way, so a shutdown that runs out of grace can end them cleanly. */
  private readonly inProgress = new Set<Cancel>();
  /** Set by abortAll: an attempt that starts afterwards (a retry after its backoff) ends at once. */
  private closed = false;
  /** The relay's limits, the same for every attempt: made once, not per request. */
  private readonly relayLimits: RelayLimits;
  /** This router's Via entry (loop detection), the same for every request. */
  private readonly via: string;

  constructor(
    private readonly registry: WorkerRegistry,
    private readonly decider: Scheduler,
    private readonly settings: ForwardSettings,
    private readonly hooks: ForwardHooks,
    /** Learns from the usage the engines report (characters per token, cached tokens). */
    private readonly feedback?: UsageFeedback,
    /** Each request's cache account (available, chosen, reported cached tokens). */
    private readonly ledger?: CacheLedger,
  ) {
    this.relayLimits = {
      idleTimeoutMs: settings.idleTimeoutMs,
      clientStallMs: settings.clientStallMs,
      // --idle-timeout-secs for every open relay, one timer for all (idle-sweep.ts).
      idle: new IdleSweep(settings.idleTimeoutMs),
    };
    this.via = viaToken(settings.instanceId);
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
    const candidates = () => admitted(this.registry.candidates(tried), plan);
    const headers = upstreamRequestHeaders(
      req.headers,
      req.requestId,
      this.settings.forwardAuthorization,
      via,
    );
    let lastFailure: AttemptFailure | undefined;
    let attempts = 0;
    let account: RequestAccount | undefined;
    // Only an index with an asynchronous step (the precise index tokenizing) makes this wait.
    // It prepares what decide() will look up: the same text under the same model key.
    const preparing = this.decider.prepare(candidates, routed);
    if (preparing !== undefined) {
      const tokenize = req.trace?.phase("tokenize");
      await preparing;
      tokenize?.end();
    }

    while (attempts < this.settings.retryMaxAttempts) {
      if (req.clientSignal.aborted) return { status: 499, attempts, error: "client_abort" };
      // The first choice of a new prefix may wait (bounded) for the replicas to agree on it.
      const deciding = req.trace?.decision();
      const choosing =
        attempts === 0
          ? this.decider.decideAgreed(withRoom(candidates(), req.roomOn), routed)
          : this.decider.decide(candidates(), routed);
      const decision = choosing instanceof Promise ? await choosing : choosing;
      deciding?.end(this.decider.policy.name, decision);
      if (!decision) break;
      this.hooks.onDecision(this.decider.policy.name, decision.branch, decision.matchRate);
      const worker = decision.worker;
      if (decision.index !== null && this.ledger !== undefined) {
        account ??= this.ledger.open(routed.text, routed.model);
        account.decided(decision);
      }
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
      const canRetry = () => attempts < this.settings.retryMaxAttempts && candidates().length > 0;
      // Other requests still prefilling there: a low cached count may be theirs, not an eviction.
      const othersPrefilling = worker.pendingPrefillRequests > 0;

      // The data-parallel rank whose cache the index chose, unless the client pinned one itself.
      const rank = rankToSend(decision.rank, req.headers, routed.body);
      const result = await this.attempt(
        worker,
        req,
        Math.max(0, routed.text.length - decision.heldBefore),
        headers,
        rank,
        deadline,
        res,
        routeHeader(base.branch, base.matchRate, decision.index, this.decider.profile),
        canRetry,
        account,
      );
      if (result.kind === "done") {
        // Only what a worker accepted stays in its index entry: an error answer, or a client gone
        // before the answer began, caches nothing there.
        if (!accepted(result.outcome)) this.decider.rejected(decision, routed);
        else if (result.usage !== undefined)
          this.feedback?.apply(worker, result.usage, decision, routed, this.decider, {
            aboutText: routed.usageDescribesText,
            othersPrefilling,
          });
        if (account === undefined || !accepted(result.outcome))
          return { ...base, ...result.outcome, usage: result.usage };
        settleAccount(this.ledger, account, routed, result.usage, worker, req.requestId);
        return { ...base, ...result.outcome, account, usage: result.usage };
      }
      this.decider.rejected(decision, routed);
      lastFailure = result.failure;
      this.hooks.onUpstreamError(worker, result.failure.kind);
      if (!result.failure.retryable) break;
      const remaining = deadline - Date.now();
      // A Retry-After holds back the worker that sent it (its cool-down), not the retry to another.
      const delay = backoffMs(
        attempts,
        this.settings.retryInitialBackoffMs,
        this.settings.retryMaxBackoffMs,
      );
      if (attempts >= this.settings.retryMaxAttempts || delay >= remaining) break;
      if (candidates().length === 0) break;
      this.hooks.onRetry(routed.endpoint);
      await sleep(delay, req.clientSignal);
    }

    const ended = attemptsOutcome(req, res, attempts, lastFailure);
    if (ended) return ended;
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

  /** One try against one worker. Either the response was (or is being) sent, or it failed before any byte. */
  private attempt(
    worker: Worker,
    req: ForwardRequest,
    /** Characters of the text the worker probably has to prefill (not held before). */
    uncachedChars: number,
    headers: Record<string, string | string[]>,
    /** The engine's data-parallel rank the request goes to, when the router chose one. */
    rank: number | undefined,
    deadline: number,
    res: ServerResponse,
    /** The x-radixgate-route header: branch, match rate, and the index when not the trees. */
    route: string,
    canRetry: () => boolean,
    account: RequestAccount | undefined,
  ): Promise<AttemptResult> {
    const { stream, text } = req.routing;
    // The priority its engine gets: in the body sent and, until the attempt ends, in the worker's
    // tally. Worked out once here (a search of the body), not again for the body.
    const priority = prioritySent(req.routing.body, req.path, worker.engine, req.priority);
    const attempt = new Attempt({
      worker,
      load: {
        textChars: text.length,
        uncachedChars,
        rank,
        enginePriority: priority,
      },
      requestId: req.requestId,
      startedAt: req.startedAt,
      deadline,
      firstByteMs: stream
        ? this.settings.streamFirstByteTimeoutMs
        : this.settings.firstByteTimeoutMs,
      stream,
      clientSignal: req.clientSignal,
      route,
      limits: this.relayLimits,
      readUsage: this.feedback !== undefined && req.method === "POST",
      onAnswerChunk: req.onAnswerChunk,
      explain: explainHeader(this.ledger, account, worker),
      onUpstreamError: this.hooks.onUpstreamError,
      trace: req.trace?.attempt(worker),
    });
    this.inProgress.add(attempt.controller);
    // Not awaited here: sendAttempt() ends the attempt itself, so a request goes through one async frame.
    return sendAttempt(
      attempt,
      req,
      headers,
      rank,
      priority,
      res,
      canRetry,
      this.closed,
      this.inProgress,
      this.settings.maxCoolDownMs,
    );
  }
}

/** The candidates where the request has room, when it says and any is left; else all of them. */
function withRoom(
  candidates: readonly Worker[],
  roomOn: ((worker: Worker) => boolean) | undefined,
): readonly Worker[] {
  if (roomOn === undefined) return candidates;
  const roomy = candidates.filter(roomOn);
  return roomy.length > 0 ? roomy : candidates;
}
