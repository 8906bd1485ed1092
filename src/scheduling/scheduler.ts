import type { PrefixClaims } from "../index/prefix-claims.js";
import type { PrefixIndex, PrepareRequest } from "../index/prefix-index.js";
import type { ModelPlan } from "../workers/served-models.js";
import type { Worker } from "../workers/worker.js";
import type { WorkerType } from "../workers/worker-role.js";
import type { DecisionTrace } from "./decision-trace.js";
import { type LossReason, lossReasonOf } from "./loss-reason.js";
import {
  CLAIM_BLOCK_CHARS,
  newPrefixClaimEnd,
  newPrefixClaimKey,
  newPrefixClaimValue,
  type ReadClaim,
  readNewPrefixClaim,
} from "./new-prefix-claim.js";
import type { SchedulingWorker } from "./plugin.js";
import {
  type Policy,
  type PolicyWorker,
  type ProfileExplanation,
  queuedPrefillChars,
  type RequestHeaders,
  type RouteDecision,
  type RouteRequest,
} from "./policy.js";
import { placementFill } from "./prefix-cost.js";
import { PrefixIndexPlugin } from "./prefix-plugin.js";
import type { SessionTable } from "./session-table.js";
import type { PromptUsage, UsageFeedback } from "./usage-feedback.js";

/** Ranks past which a replica holds no longer (bounds the wait: ranks 8 and up hold as long as 8). */
const MAX_HOLD_RANKS = 8;

/** A policy's decision, plus what the prefix index needs to take it back. */
export interface Decision<W extends PolicyWorker> extends RouteDecision<W> {
  /** Name of the index that produced the match rate; null when the policy does not use prefixes. */
  readonly index: string | null;
  /** Characters of the text the chosen worker held before this request was inserted. */
  readonly heldBefore: number;
  /**
   * The data-parallel rank of the worker's engine the index chose (its cache holds the most);
   * undefined when it has none or the index does not see ranks.
   */
  readonly rank?: number | undefined;
  /**
   * Characters of the text the best-holding candidate held (the cache account's "available"):
   * at least heldBefore; 0 when the policy does not use the index.
   */
  readonly available: number;
  /** The best-holding candidate other than the chosen one, and what it held (--explain-header). */
  readonly runnerUp: W | undefined;
  readonly runnerUpHeld: number;
  /** Why the chosen worker held less than `available`; null when it held as much. */
  readonly lossReason: LossReason | null;
  /** Its line in the decision trace (--decision-trace), for the outcome; undefined when not traced. */
  readonly traced?: number | undefined;
  /**
   * The chosen worker was still prefilling other requests when it was chosen: a low cached count
   * in its answer may be theirs, not an eviction.
   */
  readonly othersPrefilling?: boolean;
}

/** Where `schedule` lists an attempt's candidates (the registry, workers/registry.ts). */
export interface Fleet {
  candidates(exclude?: ReadonlySet<Worker>, type?: WorkerType, plan?: ModelPlan): readonly Worker[];
}

/** One attempt, as the forward stage asks `schedule` for it. */
export interface AttemptAsk {
  /** Workers already tried: a retry goes elsewhere. */
  readonly exclude: ReadonlySet<Worker>;
  /** A prefill/decode pair's side: the candidates are that side's workers. */
  readonly side?: WorkerType | undefined;
  /**
   * The request's first attempt: the index's asynchronous step runs before it (tokenizing, for
   * the precise index), and a new prefix is agreed with the replicas first.
   */
  readonly first: boolean;
  /** The room rule (admission's Admission.roomFor, --queue-when-saturated); undefined = none. */
  readonly room?: ((worker: Worker) => boolean) | undefined;
  /** A span around the index's asynchronous step, when the request is traced. */
  readonly span?: ((name: "tokenize") => { end(): void }) | undefined;
  /** The priority the engines get with it (--engine-priority); undefined = none. */
  readonly priority?: number | undefined;
}

/** A request as `schedule` takes it: the decision's facts and which workers its model admits. */
export interface ScheduledRequest extends DecisionRequest {
  readonly plan?: ModelPlan | undefined;
}

/** What `completed` learns from the end of an attempt. */
export type AttemptEnd =
  /** Not accepted (an error answer, no answer, a client gone first): the insert is taken back. */
  | { readonly accepted: false }
  | {
      readonly accepted: true;
      /** What the engine reported of the prompt, when its answer said. */
      readonly usage: PromptUsage | undefined;
      /** One prompt, whole in the text: the usage describes it. */
      readonly aboutText: boolean;
    };

export interface DecisionRequest extends PrepareRequest {
  readonly text: string;
  readonly model?: string | undefined;
  /** Conversation id (--session-affinity); its turns stay on one worker while it is a candidate. */
  readonly session?: string | undefined;
  /** The request's headers (pickers routed by a header: SGLang's x-smg-routing-key). */
  readonly headers?: RequestHeaders | undefined;
  /** The model the client named, and SGLang's lora_path adapter (scheduling profiles read them). */
  readonly requested?: string | undefined;
  readonly adapter?: string | undefined;
  /** The priority the engines get with it (RouteRequest.priority). */
  readonly priority?: number | undefined;
}

/**
 * The one scheduler: runs the profile (every --policy and --scheduler-config is one) over the
 * candidates, with the prefix plugin's stages around it (prefix-plugin.ts: prepare, match, the
 * insert after dispatch, take-back on rejection, the engine's reported cache), the session table
 * (--session-affinity) and the replicas' agreement on new prefixes (--state-url).
 */
export class Scheduler {
  /** Reused across decisions: `select` is synchronous and never keeps the array. */
  private readonly matched: number[] = [];
  private readonly fill: number[] = [];
  /** The prefix index's request-stage hooks. */
  readonly prefix: PrefixIndexPlugin;
  /** --decision-trace: every decision and its outcome, when set. */
  trace: DecisionTrace | undefined;
  /** This replica's requests claiming each new prefix now: the last one's decision (decideAgreed). */
  private readonly claiming = new Map<string, Promise<void>>();
  /** This router's rank among its replicas (RouteRequest.replicaRank), when it has peers. */
  replicaRank: (() => number) | undefined;
  /**
   * --state-rank-hold-ms: how long, per rank, a replica of rank > 0 holds a decision that places
   * or moves a prefix before taking it (decideAgreed); 0 = never.
   */
  rankHoldMs = 0;
  /**
   * This replica is the one decider of new prefixes (the leader, while its peers relay such
   * requests to it: --state-advertise-url): it takes them at once and claims nothing, as one
   * router would. Undefined = never.
   */
  decidesAlone: (() => boolean) | undefined;
  /** Resolves after `ms` (the replay's model clock replaces it). */
  wait: (ms: number) => Promise<void> = (ms) =>
    new Promise((resolve) => {
      setTimeout(resolve, ms);
    });

  constructor(
    readonly policy: Policy,
    readonly index: PrefixIndex,
    /** Session affinity, when on: consulted before the policy, updated after every decision. */
    private readonly sessions?: SessionTable,
    /** Replicas sharing state (--state-url): agreement on new prefixes (decideAgreed). */
    private readonly claims?: PrefixClaims,
    /** Learns from the usage the engines report (characters per token, cached tokens). */
    private readonly feedback?: UsageFeedback,
    /** Where each attempt's candidates come from (`schedule`); undefined where only `decide` is used. */
    private readonly fleet?: Fleet,
  ) {
    this.prefix = new PrefixIndexPlugin(index);
  }

  /** Whether it learns from the usage engines report (the forwarder then reads it from answers). */
  get readsUsage(): boolean {
    return this.feedback !== undefined;
  }

  /** The profile's name when x-radixgate-route names it (not the router's own policies). */
  get profile(): string | undefined {
    return this.policy.explain === undefined || this.policy.labelsRoute === false
      ? undefined
      : this.policy.name;
  }

  /**
   * The index's asynchronous step before `decide` (tokenizing, for the precise index); undefined
   * when there is none, so the request path awaits nothing. The candidates are only listed when
   * there is something to prepare.
   */
  prepare(
    candidates: () => readonly PolicyWorker[],
    request: DecisionRequest,
  ): Promise<void> | undefined {
    return this.policy.usesPrefixes ? this.prefix.prepare(request, candidates) : undefined;
  }

  /**
   * The schedule stage of one attempt, in one call: the candidates listed from the fleet (not
   * those already tried; the pair's side; the model's plan), the index's asynchronous step on the
   * first attempt, then the decision among the candidates where the request has room (the room
   * rule, withRoom), agreed with the replicas on a first attempt (decideAgreed). A promise only
   * when something is waited for.
   */
  schedule(
    request: ScheduledRequest,
    ask: AttemptAsk,
  ): Decision<Worker> | undefined | Promise<Decision<Worker> | undefined> {
    const fleet = this.fleet;
    if (fleet === undefined) throw new Error("this scheduler was built without a fleet");
    // Only a request with a tokenizer's input (--kv-events) can have an asynchronous step: the
    // listing closure is made for those, not for every request.
    const preparing =
      ask.first && request.tokenizeInput !== undefined
        ? this.prepare(() => fleet.candidates(ask.exclude, ask.side, request.plan), request)
        : undefined;
    if (preparing === undefined)
      return this.among(fleet.candidates(ask.exclude, ask.side, request.plan), request, ask);
    const span = ask.span?.("tokenize");
    return preparing.then(() => {
      span?.end();
      return this.among(fleet.candidates(ask.exclude, ask.side, request.plan), request, ask);
    });
  }

  private among(
    candidates: readonly Worker[],
    request: DecisionRequest,
    ask: AttemptAsk,
  ): Decision<Worker> | undefined | Promise<Decision<Worker> | undefined> {
    const roomy = withRoom(candidates, ask.room);
    // A copy only for a request with a priority (--engine-priority), which the intake cannot know.
    const asked = ask.priority === undefined ? request : { ...request, priority: ask.priority };
    return ask.first ? this.decideAgreed(roomy, asked) : this.decide(roomy, asked);
  }

  decide<W extends PolicyWorker>(
    candidates: readonly W[],
    request: DecisionRequest,
  ): Decision<W> | undefined {
    const decision = this.choose(candidates, request);
    if (decision === undefined) return undefined;
    return this.record(candidates, request, decision, this.matched, this.fill);
  }

  /**
   * `decide`, agreed with the other replicas when the text starts a prefix no worker is known to
   * hold (see scheduling/new-prefix-claim.ts): the decision is claimed, and when another replica
   * claimed the same prefix first, its worker is taken as if its decision had already arrived:
   * the policy chooses again, on the index as it is now, with that worker holding what the two
   * texts share and the prefill the claimer queued there (both read from the claim), so the
   * policy's weighing of load applies as one router's would. Without the queued prefill, the
   * first new tenants of a cold fleet (whose claims all name the shared tool preamble) all
   * followed one replica's first choice onto one worker, where one router spreads them by load.
   *
   * A request of this replica that claims a prefix this replica is already claiming waits for
   * that claim, then decides afresh after the earlier decision took its worker (its insert and
   * its load), as one router decides requests one after another: deciding them all at once,
   * before any was recorded, sent a burst of new prefixes to one worker.
   *
   * Synchronous, with no round trip, whenever no claim is needed or none can be made; the wait is
   * bounded by the claims' own timeout, after which this replica's choice stands.
   */
  decideAgreed<W extends PolicyWorker>(
    candidates: readonly W[],
    request: DecisionRequest,
  ): Decision<W> | undefined | Promise<Decision<W> | undefined> {
    const decision = this.choose(candidates, request);
    if (decision === undefined) return undefined;
    const hold = this.holdFor(candidates, request, decision);
    if (hold > 0) {
      return this.wait(hold).then(() => {
        const again = this.choose(candidates, request);
        return again === undefined ? undefined : this.agree(candidates, request, again);
      });
    }
    return this.agree(candidates, request, decision);
  }

  /**
   * How long this replica holds `decision` (just chosen, this.matched its match) before taking it:
   * rank × --state-rank-hold-ms when it places or moves a prefix (a text nobody holds, a new
   * prefix past a shared one, or a worker other than the one holding the most of it), else 0.
   *
   * Replicas behind a balancer get a burst's requests at the same instant (one engine step ends
   * several conversations' turns), and each decides before any peer's decision of that instant
   * reaches it (an op takes a few ms): 4 replicas moved tenants off their holders and placed new
   * ones on one worker several times as often as one router, which sees each decision of the
   * burst before the next. Holding by rank orders them: rank 0 decides at once, rank 1 one hold
   * later on a view that has its peers' decisions of that instant, and so on. A request that
   * stays where its prefix is (most of them) is never held.
   */
  private holdFor<W extends PolicyWorker>(
    candidates: readonly W[],
    request: DecisionRequest,
    decision: RouteDecision<W>,
  ): number {
    const rank = this.replicaRank?.() ?? 0;
    if (rank <= 0 || this.rankHoldMs <= 0 || candidates.length < 2) return 0;
    if (!this.usesIndex(request) || decision.branch === "session") return 0;
    const n = candidates.length;
    const held = this.matched[candidates.indexOf(decision.worker)] ?? 0;
    let most = 0;
    for (let i = 0; i < n; i++) most = Math.max(most, this.matched[i] ?? 0);
    const places =
      held < CLAIM_BLOCK_CHARS ||
      held < most - CLAIM_BLOCK_CHARS ||
      newPrefixClaimEnd(request.text.length, this.matched, n) >= 0;
    return places ? Math.min(rank, MAX_HOLD_RANKS) * this.rankHoldMs : 0;
  }

  /** The claim step of decideAgreed, for the decision taken (after its hold, if any). */
  private agree<W extends PolicyWorker>(
    candidates: readonly W[],
    request: DecisionRequest,
    decision: RouteDecision<W>,
  ): Decision<W> | undefined | Promise<Decision<W> | undefined> {
    const claims = this.claims;
    if (
      claims === undefined ||
      !this.usesIndex(request) ||
      decision.branch === "session" ||
      this.decidesAlone?.() === true
    ) {
      return this.record(candidates, request, decision, this.matched, this.fill);
    }
    const { text, model } = request;
    const end = newPrefixClaimEnd(text.length, this.matched, candidates.length);
    if (end < 0) return this.record(candidates, request, decision, this.matched, this.fill);
    const key = newPrefixClaimKey(model, text, end);
    const ahead = this.claiming.get(key);
    if (ahead !== undefined) {
      return this.queueBehind(
        key,
        ahead.then(afterDispatch).then(() => this.decide(candidates, request)),
      );
    }
    const chosen = candidates.indexOf(decision.worker);
    const proposed = newPrefixClaimValue(
      decision.worker.id,
      text.length - (this.matched[chosen] ?? 0),
      text,
    );
    const answer = claims.claim(key, proposed);
    if (answer === undefined) {
      return this.record(candidates, request, decision, this.matched, this.fill);
    }
    // this.matched and this.fill are scratch for the next decision: keep this one's across the wait.
    const matched = this.matched.slice(0, candidates.length);
    const fill = this.fill.slice(0, candidates.length);
    // Each candidate's queue now, to tell after the wait what reached it meanwhile.
    const queuedBefore = candidates.map(queuedPrefillChars);
    return this.queueBehind(
      key,
      answer.then((value) => {
        const claim = value === undefined ? undefined : readNewPrefixClaim(value, text);
        const i = claim === undefined ? -1 : candidates.findIndex((c) => c.id === claim.worker);
        // Won (or no answer, or a worker this replica lacks): this replica's choice stands. A
        // claim of another's on the very worker chosen here still adds its prefill there.
        if (claim === undefined || i < 0 || value === proposed) {
          return this.record(candidates, request, decision, matched, fill);
        }
        return this.follow(candidates, request, decision, claim, i, end, queuedBefore);
      }),
    );
  }

  /**
   * Whether the request's first attempt would claim its prefix (agree's condition: the index in
   * use, no session holding it, no worker singled out by the index), on the index as it is now,
   * deciding nothing: among the workers the fleet lists for it (`side`: a pair's prefill side).
   * False without claims, and for a request whose index needs its asynchronous step first (the
   * precise index's tokenizing), which is then decided here as before.
   */
  wouldClaim(request: ScheduledRequest, side?: WorkerType): boolean {
    const fleet = this.fleet;
    if (this.claims === undefined || fleet === undefined || !this.usesIndex(request)) return false;
    if (request.tokenizeInput !== undefined) return false;
    const candidates = fleet.candidates(undefined, side, request.plan);
    if (candidates.length < 2) return false;
    if (request.session !== undefined) {
      const bound = this.sessions?.workerFor(request.session);
      if (bound !== undefined && candidates.some((c) => c.id === bound)) return false;
    }
    this.prefix.match(request, candidates, this.matched);
    return newPrefixClaimEnd(request.text.length, this.matched, candidates.length) >= 0;
  }

  /**
   * The policy's choice again once another replica's claim named candidates[i]: on the index as
   * it is now (the claimer's op may have arrived meanwhile, and this replica's own decisions were
   * recorded), with that worker holding what the texts share and the claimer's prefill queued on
   * it, less what its queue grew by during the wait (the claimer's decision, when it arrived).
   */
  private follow<W extends PolicyWorker>(
    candidates: readonly W[],
    request: DecisionRequest,
    decision: RouteDecision<W>,
    claim: ReadClaim,
    i: number,
    end: number,
    queuedBefore: readonly number[],
  ): Decision<W> {
    const text = request.text;
    this.prefix.match(request, candidates, this.matched, this.fill);
    const matched = this.matched.slice(0, candidates.length);
    const fill = this.fill.slice(0, candidates.length);
    const assumed = matched.slice();
    assumed[i] = Math.max(matched[i] ?? 0, claim.shared, end);
    const arrived = queuedPrefillChars(candidates[i]!) - (queuedBefore[i] ?? 0);
    const chars = Math.max(0, claim.queued - Math.max(0, arrived));
    const fresh = this.routeRequest(request, true, undefined);
    const again =
      this.policy.select(candidates, {
        ...fresh,
        matched: assumed,
        fill,
        ...(chars > 0 ? { claimed: { index: i, chars } } : {}),
      }) ?? decision;
    const j = candidates.indexOf(again.worker);
    const agreed: RouteDecision<W> =
      j === i
        ? { worker: again.worker, branch: "peer_claim", matchRate: (matched[i] ?? 0) / text.length }
        : { ...again, matchRate: (matched[j] ?? 0) / text.length };
    return this.record(candidates, request, agreed, matched, fill);
  }

  /**
   * Marks `decided` as the last decision of this replica on the new prefix `key`: a later request
   * claiming the same prefix waits for it. The mark goes when nothing waits behind it.
   */
  private queueBehind<T>(key: string, decided: Promise<T>): Promise<T> {
    const done = decided.then(
      () => undefined,
      () => undefined,
    );
    this.claiming.set(key, done);
    void done.then(() => {
      if (this.claiming.get(key) === done) this.claiming.delete(key);
    });
    return decided;
  }

  /** Binds the session, and inserts the text for the chosen worker when the policy uses the index. */
  private record<W extends PolicyWorker>(
    candidates: readonly W[],
    request: DecisionRequest,
    decision: RouteDecision<W>,
    matched: readonly number[],
    /** Each candidate's fill at decision time (kept across a claim's wait, as `matched`). */
    fill: readonly number[],
  ): Decision<W> {
    const { worker, branch, matchRate } = decision;
    if (request.session !== undefined) this.sessions?.bind(request.session, worker.id);
    // The engine loads the adapter for this request, if it had not: the router's record of it.
    const adapter = request.adapter ?? request.requested;
    if (adapter !== undefined) (worker as SchedulingWorker).loraRouted?.(adapter);
    // Whether the worker was still prefilling others when chosen, read before this request counts.
    const othersPrefilling = (worker.pendingPrefillRequests ?? 0) > 0;
    // Literals of one shape, not spreads of the policy's object: this runs for every request.
    if (!this.usesIndex(request)) {
      return {
        traced: undefined,
        worker,
        branch,
        matchRate,
        index: null,
        heldBefore: 0,
        rank: undefined,
        available: 0,
        runnerUp: undefined,
        runnerUpHeld: 0,
        lossReason: null,
        othersPrefilling,
      };
    }
    const chosen = candidates.indexOf(worker);
    const heldBefore = matched[chosen] ?? 0;
    // The best holder and the runner-up (the best of the others), before the insert: one pass.
    let best = chosen;
    let runnerUp = -1;
    for (let i = 0; i < candidates.length; i++) {
      const held = matched[i] ?? 0;
      if (held > (matched[best] ?? 0)) best = i;
      if (i !== chosen && (runnerUp < 0 || held > (matched[runnerUp] ?? 0))) runnerUp = i;
    }
    const available = matched[best] ?? 0;
    // A profile's filter verdicts are the last select's: the decision just taken, unless a
    // replica's claim was awaited in between (then at worst a reason is misnamed).
    const lossReason =
      available > heldBefore
        ? lossReasonOf(branch, this.policy.filteredOut?.(best) === true)
        : null;
    const traced =
      this.trace === undefined
        ? undefined
        : this.traced(candidates, request, decision, matched, fill);
    // Room for the requests running there (this one too) before its text goes in.
    this.prefix.reserve(worker.id, worker.inFlight + 1, worker.runningReserveChars ?? 0);
    const rank = this.prefix.afterDispatch(
      worker.id,
      request,
      Math.max(0, request.text.length - heldBefore),
    );
    return {
      traced,
      worker,
      branch,
      matchRate,
      index: this.sourceOf(worker.id),
      heldBefore,
      rank,
      available,
      // Never candidates[-1]: a read out of an array's bounds takes V8's slow path.
      runnerUp: runnerUp < 0 ? undefined : candidates[runnerUp],
      runnerUpHeld: runnerUp < 0 ? 0 : (matched[runnerUp] ?? 0),
      lossReason,
      othersPrefilling,
    };
  }

  /** One decision's line: every candidate's held characters, fill and the policy's cost. */
  private traced<W extends PolicyWorker>(
    candidates: readonly W[],
    request: DecisionRequest,
    decision: RouteDecision<W>,
    matched: readonly number[],
    fill: readonly number[],
  ): number {
    const length = request.text.length;
    const now = Date.now();
    const cost = this.policy.cost;
    // The cost as the policy weighed it (prefix-cost.ts placementFill).
    const fills = placementFill(fill, matched, candidates.length);
    const rows = candidates.map((worker, i) => {
      const held = Math.min(length, Math.max(0, matched[i] ?? 0));
      const url = (worker as { url?: unknown }).url;
      return {
        worker,
        url: typeof url === "string" ? url : undefined,
        held,
        fill: fill[i] ?? 0,
        cost:
          cost === undefined
            ? null
            : cost.call(this.policy, worker, held, length, now, fills?.[i] ?? 0),
      };
    });
    return this.trace!.decided(
      request.text,
      request.model,
      rows,
      decision.worker.id,
      decision.branch,
    );
  }

  /** The engine's usage for a decision: its outcome line in the trace. */
  outcome(decision: Decision<PolicyWorker>, promptTokens: number, cachedTokens: number): void {
    if (decision.traced !== undefined)
      this.trace?.outcome(decision.traced, promptTokens, cachedTokens);
  }

  /**
   * What `decide` would choose now and why, without recording anything (no index insert, no
   * session binding): for a dry run such as POST /debug/route. Each candidate's matched
   * characters and the index that answered; null where the policy does not look at prefixes.
   */
  explain<W extends PolicyWorker>(
    candidates: readonly W[],
    request: DecisionRequest,
  ): {
    decision: RouteDecision<W> | undefined;
    matched: number[] | null;
    /** Each candidate's cache fill as the index sees it (RouteRequest.fill); null as matched. */
    fill: number[] | null;
    indexes: string[] | null;
    /** A scheduling profile's per-candidate verdicts (filters, scores, weights); else undefined. */
    profile: ProfileExplanation | undefined;
  } {
    const decision = this.choose(candidates, request);
    const usesIndex = this.usesIndex(request);
    const sessionWorker =
      request.session === undefined ? undefined : this.sessions?.workerFor(request.session);
    const profile = this.policy.explain?.(
      candidates,
      this.routeRequest(
        request,
        usesIndex,
        this.policy.handlesSessions ? sessionWorker : undefined,
      ),
    );
    if (!usesIndex) return { decision, matched: null, fill: null, indexes: null, profile };
    return {
      decision,
      matched: this.matched.slice(0, candidates.length),
      fill: this.fill.slice(0, candidates.length),
      indexes: candidates.map((c) => this.sourceOf(c.id)),
      profile,
    };
  }

  private usesIndex(request: DecisionRequest): boolean {
    return this.policy.usesPrefixes && request.text.length > 0;
  }

  private sourceOf(workerId: string): string {
    return this.prefix.sourceOf(workerId);
  }

  /** Matches the text in the index (into this.matched), then the profile's pick. */
  private choose<W extends PolicyWorker>(
    candidates: readonly W[],
    request: DecisionRequest,
  ): RouteDecision<W> | undefined {
    const usesIndex = this.usesIndex(request);
    const matched = this.matched;
    if (usesIndex) {
      this.prefix.match(request, candidates, matched, this.fill);
    }
    const sessionWorker =
      request.session === undefined ? undefined : this.sessions?.workerFor(request.session);
    return this.policy.select(candidates, this.routeRequest(request, usesIndex, sessionWorker));
  }

  /** What the policy sees of the request: matched lengths only when it reads the index. */
  private routeRequest(
    request: DecisionRequest,
    usesIndex: boolean,
    sessionWorker: string | undefined,
  ): RouteRequest {
    const { text, model, requested, adapter, session, headers, priority } = request;
    return {
      priority,
      text,
      model,
      matched: usesIndex ? this.matched : undefined,
      fill: usesIndex ? this.fill : undefined,
      requested,
      adapter,
      session,
      headers,
      sessionWorker,
      replicaRank: this.replicaRank?.(),
    };
  }

  /**
   * The chosen worker did not accept the request (an error status, a refused connection, a retry
   * elsewhere): it will not cache the text, so the index keeps only what it held before.
   */
  rejected(decision: Decision<PolicyWorker>, request: DecisionRequest): void {
    if (decision.index === null) return;
    this.prefix.rejected(decision.worker.id, request, decision.heldBefore);
  }

  /**
   * The complete stage of an attempt, in one call: not accepted, the index takes back its insert
   * (`rejected`); accepted, what its engine reported of the prompt teaches the worker's
   * characters per token and corrects the index (usage-feedback.ts). Returns the worker's
   * characters per token as now learned (the cache account counts tokens with it).
   */
  completed(decision: Decision<Worker>, request: DecisionRequest, end: AttemptEnd): number {
    const worker = decision.worker;
    if (!end.accepted) this.rejected(decision, request);
    else if (end.usage !== undefined && this.readsUsage) {
      this.feedback?.apply(worker, end.usage, decision, request, this, {
        aboutText: end.aboutText,
        othersPrefilling: decision.othersPrefilling === true,
      });
    }
    return worker.charsPerToken;
  }

  /**
   * The chosen worker's engine reports holding only about `engineHeld` characters of the text
   * before this request (it evicted the rest): whatever the index keeps below that point is gone
   * from the engine too (prefix caches are prefix-closed), so forget it; this request's own text
   * was just computed there and stays. Returns the characters forgotten (net of the text).
   */
  reported(decision: Decision<PolicyWorker>, request: DecisionRequest, engineHeld: number): number {
    if (decision.index === null) return 0;
    return this.prefix.completed(decision.worker.id, request, engineHeld);
  }
}

/**
 * Resolves once the decision just made has taken its worker: the forward stage dispatches it
 * (counts its load on the worker) in the same turn of the event loop, so the next turn sees it.
 */
function afterDispatch(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/**
 * The room rule: the candidates where the request has room (admission's Admission.roomFor: not
 * saturated, or outranking the work that fills them), when any is left; else all of them, so the
 * request still goes somewhere (it was admitted because one had room a moment ago).
 */
export function withRoom<W>(
  candidates: readonly W[],
  room: ((worker: W) => boolean) | undefined,
): readonly W[] {
  if (room === undefined) return candidates;
  const roomy = candidates.filter(room);
  return roomy.length > 0 ? roomy : candidates;
}
