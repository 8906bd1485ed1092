/**
 * The data plane of a disaggregated fleet: each request goes to a pair, a prefill worker chosen
 * by the prefill policy (where the prompt's prefix is cached: the prefix index's business) and a
 * decode worker chosen by the decode policy (load), with SGLang's protocol (sglang-pair.ts) or
 * vLLM's (vllm-pair.ts). A pair that fails before the client saw a byte is tried again, the
 * failed side's worker left out (each side's breaker hears only about its own worker); after
 * the first byte, never.
 */
import type { ServerResponse } from "node:http";
import type { CacheLedger } from "../cache-account/cache-ledger.js";
import type { RequestAccount } from "../cache-account/request-account.js";
import { RouterError } from "../errors.js";
import type { Decision, RoutingDecider } from "../policies/decider.js";
// The router's shutdown grace ran out: the same reason the regular forwarder gives.
import { ShutdownAbort as RouterShutdown } from "../proxy/abort-reasons.js";
import { explainHeader, settleAccount } from "../proxy/account-settle.js";
import { Attempt, type RelayLimits } from "../proxy/attempt.js";
import { attemptsOutcome } from "../proxy/attempts-outcome.js";
import { backoffMs, sleep } from "../proxy/backoff.js";
import type { Cancel } from "../proxy/cancel.js";
import type {
  ForwardHooks,
  ForwardOutcome,
  ForwardRequest,
  ForwardSettings,
  RequestForwarder,
} from "../proxy/forward.js";
import { upstreamRequestHeaders, viaToken, withWorkerAuth } from "../proxy/headers.js";
import { IdleSweep } from "../proxy/idle-sweep.js";
import { refusal } from "../proxy/no-worker-answers.js";
import { routeHeader } from "../proxy/route-header.js";
import type { AttemptFailure } from "../proxy/upstream-failure.js";
import { writeError } from "../proxy/write-error.js";
import type { WorkerRegistry } from "../workers/registry.js";
import { admitted } from "../workers/served-models.js";
import type { Worker } from "../workers/worker.js";
import type { JsonObject } from "./bootstrap.js";
import type { PairResult, PairTry, Side } from "./pair-try.js";
import { pdBodyRefusal } from "./pd-body.js";
import { sglangPair } from "./sglang-pair.js";
import { vllmPair } from "./vllm-pair.js";

export type PdProtocol = "sglang" | "vllm";

export class PairForwarder implements RequestForwarder {
  private readonly inProgress = new Set<Cancel>();
  private closed = false;
  private readonly relayLimits: RelayLimits;
  /** This router's Via token: the same for every request, made once (as the forwarder keeps it). */
  private readonly via: string;
  private readonly dispatch: (t: PairTry) => Promise<PairResult>;

  constructor(
    private readonly registry: WorkerRegistry,
    /** The prefill policy over the prefix index (the router's decider). */
    private readonly prefillDecider: RoutingDecider,
    /** The decode policy, over the same index. */
    private readonly decodeDecider: RoutingDecider,
    private readonly settings: ForwardSettings,
    private readonly hooks: ForwardHooks,
    private readonly protocol: PdProtocol,
    /**
     * Each request's cache account, as the regular forwarder keeps it: the prefill side's choice
     * is the accounted one (the prefix cache is there), its answer's cached count the reported one.
     */
    private readonly ledger?: CacheLedger,
  ) {
    this.relayLimits = {
      idleTimeoutMs: settings.idleTimeoutMs,
      clientStallMs: settings.clientStallMs,
      // One timer for the idle limit of every open side, as the regular forwarder keeps it.
      idle: new IdleSweep(settings.idleTimeoutMs),
    };
    this.dispatch = protocol === "sglang" ? sglangPair : vllmPair;
    this.via = viaToken(settings.instanceId);
  }

  abortAll(): number {
    this.closed = true;
    for (const controller of this.inProgress) controller.abort(new RouterShutdown());
    return this.inProgress.size;
  }

  async forward(req: ForwardRequest, res: ServerResponse): Promise<ForwardOutcome> {
    const settings = this.settings;
    const deadline = req.startedAt + settings.requestTimeoutMs;
    const via = this.via;
    const refused = refusal(req, via, this.registry, settings.modelRouting);
    if (refused !== undefined) {
      writeError(res, refused.error, req.requestId);
      return { status: refused.error.status, attempts: 0, error: refused.kind };
    }
    const routed = req.routing;
    const plan = routed.plan;
    // Intake's parse, kept for the pair (IntakeOptions.keepJson); parsed here only when intake
    // parsed it in a parse worker, whose object stayed in that thread.
    const bytes = routed.body;
    const body = routed.json ?? jsonObject(bytes);
    if (body === undefined || bytes === undefined) {
      const error = new RouterError(
        "invalid_request",
        "Prefill/decode disaggregation needs a JSON object body (the router adds the hand-off fields to it).",
      );
      writeError(res, error, req.requestId);
      return { status: error.status, attempts: 0, error: "invalid_request" };
    }
    const refusedBody = pdBodyRefusal(this.protocol, routed.endpoint, body);
    if (refusedBody !== undefined) {
      writeError(res, refusedBody, req.requestId);
      return { status: refusedBody.status, attempts: 0, error: "invalid_request" };
    }
    const headers = upstreamRequestHeaders(
      req.headers,
      req.requestId,
      settings.forwardAuthorization,
      via,
    );
    const tried: Record<Side, Set<Worker>> = { prefill: new Set(), decode: new Set() };
    const candidates = (side: Side) => admitted(this.registry.candidates(tried[side], side), plan);
    const preparing = this.prefillDecider.prepare(() => candidates("prefill"), routed);
    if (preparing !== undefined) await preparing;

    let attempts = 0;
    let lastFailure: AttemptFailure | undefined;
    let account: RequestAccount | undefined;
    while (attempts < settings.retryMaxAttempts) {
      if (req.clientSignal.aborted) return { status: 499, attempts, error: "client_abort" };
      const prefills = candidates("prefill");
      const decodes = candidates("decode");
      if (prefills.length === 0 || decodes.length === 0) break;
      const deciding = req.trace?.decision();
      const choosing =
        attempts === 0
          ? this.prefillDecider.decideAgreed(prefills, routed)
          : this.prefillDecider.decide(prefills, routed);
      const p = choosing instanceof Promise ? await choosing : choosing;
      deciding?.end(this.prefillDecider.policy.name, p);
      const d = this.decodeDecider.decide(decodes, routed);
      if (p === undefined || d === undefined) {
        if (p !== undefined) this.prefillDecider.rejected(p, routed);
        if (d !== undefined) this.decodeDecider.rejected(d, routed);
        break;
      }
      this.hooks.onDecision(this.prefillDecider.policy.name, p.branch, p.matchRate);
      if (p.index !== null && this.ledger !== undefined) {
        account ??= this.ledger.open(routed.text, routed.model);
        account.decided(p);
      }
      attempts += 1;
      const route = `${routeHeader(p.branch, p.matchRate, p.index, this.prefillDecider.profile)};prefill=${p.worker.id}`;
      // Another pair exists once this one's failed side is left out.
      const canRetry = (side: Side) => {
        const failed = side === "prefill" ? p.worker : d.worker;
        const other: Side = side === "prefill" ? "decode" : "prefill";
        return (
          attempts < settings.retryMaxAttempts &&
          candidates(side).some((w) => w !== failed) &&
          candidates(other).length > 0
        );
      };
      // The prefill side's choice is the accounted one: the prefix cache is there.
      const explain = explainHeader(this.ledger, account, p.worker);
      const result = await this.tryPair(
        req,
        res,
        body,
        bytes,
        headers,
        p,
        d,
        deadline,
        route,
        canRetry,
        explain,
      );
      const base = { branch: p.branch, matchRate: p.matchRate, index: p.index, attempts };
      if (result.kind === "done") {
        const outcome = { ...base, ...result.outcome, worker: result.outcome.worker ?? d.worker };
        if (!accepted(result.outcome)) {
          this.rejectBoth(p, d, routed);
          return outcome;
        }
        if (account === undefined) return outcome;
        settleAccount(this.ledger, account, routed, result.prefillUsage, p.worker, req.requestId);
        return { ...outcome, account };
      }
      this.rejectBoth(p, d, routed);
      lastFailure = result.failure;
      for (const side of result.failed) {
        const worker = side === "prefill" ? p.worker : d.worker;
        tried[side].add(worker);
        this.hooks.onUpstreamError(worker, result.failure.kind);
      }
      if (!result.failure.retryable) break;
      const delay = backoffMs(attempts, settings.retryInitialBackoffMs, settings.retryMaxBackoffMs);
      if (attempts >= settings.retryMaxAttempts || delay >= deadline - Date.now()) break;
      if (candidates("prefill").length === 0 || candidates("decode").length === 0) break;
      this.hooks.onRetry(routed.endpoint);
      await sleep(delay, req.clientSignal);
    }

    const ended = attemptsOutcome(req, res, attempts, lastFailure);
    if (ended) return ended;
    const error = new RouterError("no_workers_available", this.noPairMessage(tried));
    writeError(res, error, req.requestId);
    return { status: error.status, attempts, error: "no_workers" };
  }

  private tryPair(
    req: ForwardRequest,
    res: ServerResponse,
    body: JsonObject,
    /** The same body as the client sent it. */
    bytes: Buffer,
    headers: Record<string, string | string[]>,
    p: Decision<Worker>,
    d: Decision<Worker>,
    deadline: number,
    route: string,
    canRetry: (side: Side) => boolean,
    /** The --explain-header, sent with the decode side's answer (the one the client gets). */
    explain: readonly [string, string] | undefined,
  ): Promise<PairResult> {
    const text = req.routing.text;
    const controllers: Cancel[] = [];
    const open = (worker: Worker, side: Side): Attempt => {
      const stream = req.routing.stream;
      // A vLLM prefill is asked for one token, not streamed: its head comes after prefill.
      const firstByteMs =
        stream && !(side === "prefill" && this.dispatch === vllmPair)
          ? this.settings.streamFirstByteTimeoutMs
          : this.settings.firstByteTimeoutMs;
      const attempt = new Attempt({
        worker,
        // The prefill side computes what it does not hold; the decode side holds the sequence.
        load: {
          textChars: text.length,
          uncachedChars: side === "prefill" ? Math.max(0, text.length - p.heldBefore) : 0,
        },
        requestId: req.requestId,
        startedAt: req.startedAt,
        deadline,
        firstByteMs,
        stream,
        clientSignal: req.clientSignal,
        route,
        limits: this.relayLimits,
        // The decode side's answer is the one the client gets, and it reports the whole
        // request's tokens (the prompt and all generated): what a tenant quota charges.
        readUsage: side === "decode" && req.method === "POST",
        explain: side === "decode" ? explain : undefined,
        onUpstreamError: this.hooks.onUpstreamError,
        trace: req.trace?.attempt(worker, side),
      });
      if (this.closed) attempt.controller.abort(new RouterShutdown());
      this.inProgress.add(attempt.controller);
      controllers.push(attempt.controller);
      return attempt;
    };
    // Controllers whose side goes on after the try (a prefill answer read to its end).
    const backgrounded = new Set<Cancel>();
    const t: PairTry = {
      req,
      res,
      body,
      bytes,
      prefill: p.worker,
      decode: d.worker,
      headersFor: (worker) => withWorkerAuth(headers, worker.authorization),
      open,
      canRetry,
      track: (attempt, work) => {
        backgrounded.add(attempt.controller);
        void work.finally(() => this.inProgress.delete(attempt.controller));
      },
    };
    return this.dispatch(t).finally(() => {
      for (const c of controllers) if (!backgrounded.has(c)) this.inProgress.delete(c);
    });
  }

  private rejectBoth(p: Decision<Worker>, d: Decision<Worker>, routed: ForwardRequest["routing"]) {
    this.prefillDecider.rejected(p, routed);
    this.decodeDecider.rejected(d, routed);
  }

  /** The 503's message: which side has no worker to take the request. */
  private noPairMessage(tried: Record<Side, Set<Worker>>): string {
    const count = (side: Side) => this.registry.candidates(undefined, side).length;
    const total = (side: Side) => this.registry.list().filter((w) => w.role.type === side).length;
    const sides = (["prefill", "decode"] as const)
      .filter((side) => count(side) === 0 || tried[side].size >= count(side))
      .map((side) => `${side} (${count(side)} of ${total(side)} available)`);
    return `No prefill/decode pair can take the request: no ${sides.join(" and no ")} worker left to try (unhealthy, circuit open, cooling down, or not serving the model). Add workers with --prefill/--decode or POST /workers with a worker_type.`;
  }
}

/** The body as a JSON object, or undefined (a PD request must be one): a body intake did not keep. */
function jsonObject(body: Buffer | undefined): JsonObject | undefined {
  if (body === undefined) return undefined;
  try {
    const value: unknown = JSON.parse(body.toString("utf8"));
    return typeof value === "object" && value !== null && !Array.isArray(value)
      ? (value as JsonObject)
      : undefined;
  } catch {
    return undefined;
  }
}

function accepted(outcome: { status: number; upstreamStatus?: number }): boolean {
  const status = outcome.upstreamStatus ?? outcome.status;
  return status >= 200 && status < 300;
}
