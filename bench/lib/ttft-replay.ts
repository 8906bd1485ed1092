/**
 * A deterministic replay of one bench:routing workload in model time, for finding where TTFT goes:
 * the simulator's engines and KV caches (sim/engine.ts, kv-cache.ts) on a virtual clock, the
 * router's own decision path (Scheduler over the approximate index, the real policy), its
 * per-worker bookkeeping (in-flight, pending uncached prefill until the first token) and the
 * closed-loop client of bench:routing (lanes, a chat's turn after the previous reply). No HTTP,
 * no CPU contention: the same inputs give the same figures, so two policies (or a policy and the
 * tenant-sticky oracle) can be compared request by request.
 *
 * Each request's TTFT (arrival at the engine → first token, model ms) is split into:
 * - wait: arrival → admission (the step in progress ends; FIFO behind KV room);
 * - own: its own uncached prefill at the prefill throughput;
 * - others: prefill of other requests computed in the same steps as its own;
 * - rest: the remainder of those steps (decode tokens of the batch, the memory-bound floor).
 * and compared with `alone`, its TTFT on an idle engine with the same cached tokens.
 */

import { loadRuleOf } from "../../sim/dp-ranks.js";
import { Engine } from "../../sim/engine.js";
import { type KvCacheListener, PrefixKvCache } from "../../sim/kv-cache.js";
import { ManualClock } from "../../sim/manual-clock.js";
import { DEFAULT_FLAVOR, DEFAULT_NUMERIC_OPTIONS } from "../../sim/options.js";
import { mulberry32 } from "../../sim/prng.js";
import { renderChat } from "../../sim/template.js";
import { DEFAULT_TIMING, estimateLatency, type StepShape } from "../../sim/timing.js";
import { tokenize } from "../../sim/tokenizer.js";
import { openAiBody, type RequestSpec } from "../../sim/workloads.js";
import { ApproximateIndex } from "../../src/index/approximate-index.js";
import { HybridIndex } from "../../src/index/hybrid-index.js";
import type { TierWeights } from "../../src/index/kv-tiers.js";
import { PreciseIndex } from "../../src/index/precise-index.js";
import type { PrefixClaims } from "../../src/index/prefix-claims.js";
import type { PrefixIndex } from "../../src/index/prefix-index.js";
import { routingText } from "../../src/intake/routing-text.js";
import type { DecisionTrace } from "../../src/scheduling/decision-trace.js";
import {
  CLAIM_BLOCK_CHARS,
  newPrefixClaimEnd,
  newPrefixClaimKey,
  newPrefixClaimValue,
  readNewPrefixClaim,
} from "../../src/scheduling/new-prefix-claim.js";
import type {
  Policy,
  PolicyWorker,
  RouteDecision,
  RouteRequest,
} from "../../src/scheduling/policy.js";
import { KEY_ALIGN, prefixKey, rendezvousScore } from "../../src/scheduling/prefix-hash.js";
import { type Decision, type DecisionRequest, Scheduler } from "../../src/scheduling/scheduler.js";
import { engineHeldChars } from "../../src/scheduling/usage-feedback.js";
import { PeerPending, type PendingLoad } from "../../src/state/peer-pending.js";
import { PublishingIndex } from "../../src/state/publishing-index.js";
import type { StateOp } from "../../src/state/state-op.js";
import { CharsPerToken } from "../../src/workers/chars-per-token.js";
import { RunningReserve } from "../../src/workers/running-reserve.js";
import { EngineSignals, foreignQueued, STALE_AFTER_INTERVALS } from "../../src/workers/signals.js";
import { learnedTreeBudget } from "../../src/workers/tree-budget.js";
import type { PreparedWorkload } from "./routing-workloads.js";

/** The router's --kv-index-max-blocks and --kv-speculative-ttl-ms defaults. */
const PRECISE_MAX_BLOCKS = 262_144;
const PRECISE_SPECULATIVE_TTL_MS = 2000;

/** An engine cache's announcements, applied to the precise index as the router applies its events. */
function eventsTo(precise: PreciseIndex, workerId: string): KvCacheListener {
  // Engine hashes as the router normalises them (block-events.ts EngineHash).
  const id = (hash: number) => String(hash);
  return {
    stored: (hashes, parent, tokens, medium = "GPU") => {
      precise.apply(workerId, {
        type: "BlockStored",
        blockHashes: hashes.map(id),
        parentHash: parent === null ? null : id(parent),
        tokenIds: tokens,
        blockSize: tokens.length / hashes.length,
        loraId: null,
        medium,
        loraName: null,
      });
    },
    removed: (hashes, medium = "GPU") =>
      precise.apply(workerId, { type: "BlockRemoved", blockHashes: hashes.map(id), medium }),
    cleared: () => precise.apply(workerId, { type: "AllBlocksCleared" }),
  };
}

/** --state-max-text-chars' default: the routed text a decision shares with the peers. */
const MAX_SHARED_TEXT_CHARS = 16_384;

/** The simulator's defaults. */
const {
  maxRunning: MAX_RUNNING,
  maxBatchTokens: MAX_BATCH_TOKENS,
  blockSize: BLOCK_SIZE,
} = DEFAULT_NUMERIC_OPTIONS;

interface Step {
  start: number;
  end: number;
  prefillTokens: number;
}

/** One replayed request, model ms. */
export interface ReplayedRequest {
  spec: RequestSpec;
  worker: number;
  promptTokens: number;
  cachedTokens: number;
  arrival: number;
  admitted: number;
  firstToken: number;
  ttft: number;
  wait: number;
  own: number;
  others: number;
  rest: number;
  alone: number;
  /** Characters of the routing text the index said the chosen worker held (0 when pinned). */
  matchedChars: number;
}

/** A request the chosen engine refused, as the engine's HTTP API would (status 400). */
export interface ReplayedRejection {
  spec: RequestSpec;
  worker: number;
  promptTokens: number;
  error: string;
}

export interface ReplayResult {
  requests: ReplayedRequest[];
  /** Refused requests (prompt + max tokens larger than the whole KV cache): not in hitRate. */
  rejected: ReplayedRejection[];
  perWorker: number[];
  hitRate: number;
}

/** Who decides: a router policy (through the decider and the index), or a fixed assignment. */
export type Chooser =
  | { kind: "policy"; policy: Policy }
  /**
   * The policy over the engines' KV events (--kv-events): each engine's cache announces what it
   * stores and drops, on every tier, to a precise index weighing tiers by `tierWeights`, at once
   * (no event latency), and the router tokenizes as the engines do.
   */
  | { kind: "precise"; policy: Policy; tierWeights: TierWeights }
  | { kind: "pinned"; workerOf: (spec: RequestSpec, workers: number) => number };

/**
 * Router replicas behind a balancer that spreads requests at random, sharing state as over
 * --state-url (src/state/): each has its own index, scheduler and per-worker counts; its decisions
 * (index inserts and truncates with the prefill they queued, state/publishing-index.ts) reach the
 * peers `delayMs` later and count there as queued prefill (state/peer-pending.ts) until the
 * decider's next load report covers them; every `loadIntervalMs` each replica reports its
 * in-flight and pending prefill per worker (state/load-sync.ts), read by the peers `delayMs`
 * later; a new prefix is claimed first come first served where the claim arrives `delayMs` after it
 * leaves, its answer `delayMs` after that (state/prefix-claims.ts). Replica r has rank r, and
 * holds a decision that places or moves a prefix r × `rankHoldMs` (scheduler.ts holdFor).
 */
export interface ReplicaModel {
  count: number;
  /**
   * One-way latency of an op, a load report and each leg of a claim's round trip (model ms); 0:
   * at once, so every decision sees every earlier one, even of the same instant.
   */
  delayMs: number;
  /** --state-load-interval-ms (model ms). */
  loadIntervalMs: number;
  /** --state-claim-ttl-ms; 0 turns claims off (--state-claim-timeout-ms 0). */
  claimTtlMs: number;
  /** --state-rank-hold-ms (model ms; 0 = off). */
  rankHoldMs: number;
  /** Which replica each request reaches. */
  seed: number;
  /** A fresh policy for replica `rank` >= 1 (replica 0 takes the chooser's). */
  policyOf: (rank: number) => Policy;
  /**
   * Who decides a request (ReplicaDecider); undefined: the replica it reached, claiming new
   * prefixes.
   */
  decider?: ReplicaDecider;
  /** With `leader-built`: which of leader-new's ways it takes instead of the built one's. */
  built?: BuiltLeaderSwitches;
}

/**
 * A model of deciding elsewhere than at the replica a request reached, with no claim: the asking
 * replica sends the request's text to the decider and dispatches to the worker it answers; ask and
 * answer each go through the meeting place (two legs of `delayMs` each way, as a request and its
 * reply over Redis lists would). The decider counts the request as its own until its end, and
 * learns of the first byte and the end one leg late. `leader`: every decision at rank 0;
 * `leader-new`: at rank 0 only those that would claim a new prefix (no worker singled out by the
 * index, state/prefix-claims.ts), the others where they arrived; `tenant`: at the rendezvous
 * winner among the replicas of the request's tenant (a tenant header); `text`: of the text past
 * what every worker holds (the fleet-wide preamble).
 */
export type ReplicaDecider = "leader" | "leader-new" | "leader-built" | "tenant" | "text";

/**
 * `leader-built`: the one decider of new prefixes as it was built in the router (commit 664c203b,
 * taken out again in 92005da5), to set beside `leader-new`. Where a replica of rank > 0 would
 * claim, it asks rank 0 (two legs each way) with its candidates' matched lengths; the leader
 * chooses with those lengths (the worker it last gave the same prefix, within the claim TTL,
 * taken to hold what the two texts share) and its own load and fills, remembers the grant, and
 * counts it as the asker's queued prefill (one queued request) until a report of the asker past
 * the asker's last op at the ask reaches it; the asker dispatches, counts, reports and publishes
 * the request as its own. A later request of the same prefix at the asker waits for the earlier
 * answer, then decides on its own view. The leader decides its own new prefixes at once, the
 * worker it remembers for the prefix taken to hold it. Each switch takes one of leader-new's
 * ways instead.
 */
export interface BuiltLeaderSwitches {
  /**
   * The leader chooses on its own tree (the text matched in its index) and inserts the grant
   * there at once, without publishing it (the asker's op still does); nothing remembered.
   */
  ownTree?: boolean;
  /**
   * The leader takes the grant as one of its own decisions: on its tree, the insert published to
   * every replica with the prefill it queues, the request counted in its own in flight and queued
   * prefill (so its reports carry it) until a report the asker sends after the dispatch reaches
   * it. The asker's index learns of it from the leader's op alone.
   */
  leaderRecords?: boolean;
  /** A later request of a prefix the replica is asking about asks too, rather than waiting. */
  askEach?: boolean;
  /**
   * The asker does not count the granted request at all; the leader counts it as its own until
   * its end (queued prefill until the first byte), hearing of each one leg late.
   */
  leaderCounts?: boolean;
}

/**
 * The scheduler's steps that `leader-built` takes one at a time, as the built code did inside
 * the scheduler (private there: no production path needs them apart).
 */
interface SchedulerSteps {
  choose<W extends PolicyWorker>(
    candidates: readonly W[],
    request: DecisionRequest,
  ): RouteDecision<W> | undefined;
  record<W extends PolicyWorker>(
    candidates: readonly W[],
    request: DecisionRequest,
    decision: RouteDecision<W>,
    matched: readonly number[],
    fill: readonly number[],
  ): Decision<W>;
  routeRequest(request: DecisionRequest, usesIndex: boolean, session: undefined): RouteRequest;
  readonly matched: number[];
  readonly fill: number[];
  readonly policy: Policy;
  readonly prefix: Pick<Scheduler["prefix"], "match">;
}

/** A grant the leader counts on its view of a worker until a report of the asker covers it. */
interface Grant {
  readonly asker: string;
  readonly worker: ReplayWorker;
  readonly chars: number;
  /** Counted as the leader's own request (leaderRecords), else as a peer's queued prefill. */
  readonly own: boolean;
  /** The asker's sequence number its report must reach. */
  seq: number;
}

/**
 * Where replicas' decisions part from one router's, decision by decision: each replica decision
 * is set against what a router holding the fleet's tree (every replica's op applied at once) and
 * the fleet's load (every replica's in-flight and queued prefill, now) would choose in the same
 * instant, and, where they differ, against that router with only the tree or only the load of the
 * fleet, to name the view whose lag made the difference. `lostChars`: what the fleet's tree holds
 * on the fleet router's choice beyond the replica's (the prefill the difference costs at once).
 */
export interface ReplicaAttribution {
  decisions: number;
  agree: number;
  /**
   * `${kind}/${cause}`. kind: `new` (in the fleet's tree no worker holds a block more of the text
   * than every other) or `held`, with `:less` when the replica's tree lacks a block the fleet's
   * holds (a peer's op not here yet), `:more` when it keeps one the fleet's no longer holds,
   * `:both`. cause: `wait` (decided after a claim's round trip, the fleet router asked again at
   * that instant), `claim` (its own view chose as the fleet router, a claim's answer moved it),
   * `tree` / `load` (the fleet's tree / load alone would have chosen as the fleet router),
   * `either`, `tree+load` (only both together).
   */
  differ: Map<string, { count: number; lostChars: number }>;
}

/** The workers (by index) the attribution's routers chose for one decision, and what each held. */
interface Counterfactual {
  /** Model time of the question. */
  at: number;
  fleet: number;
  tree: number;
  load: number;
  own: number;
  kind: string;
  held: Map<number, number>;
}

interface ReplayWorker extends PolicyWorker {
  /** This router's requests there (in flight). */
  ownInFlight: number;
  /** Its peers' in flight there, as their last load reports said. */
  peerInFlight: number;
  readonly inFlight: number;
  readonly peerPendingPrefillChars: number;
  readonly peerPendingPrefillRequests: number;
  /** Its peers' queued prefill here, as their ops and reports say (state/peer-pending.ts). */
  peerChars: number;
  peerRequests: number;
  /** The leader's grants here not yet covered (`leader-built`). */
  grantChars: number;
  grantRequests: number;
  setPeerPendingPrefill(chars: number, requests: number): void;
  /** What the engine poll last read (its queue, the router's pending count then), in model ms. */
  readonly signals: EngineSignals;
  pendingPrefillChars: number;
  pendingPrefillRequests: number;
  readonly index: number;
  readonly engine: Engine;
  readonly steps: Step[];
  readonly cpt: CharsPerToken;
  readonly running: RunningReserve;
  readonly runningReserveChars: number;
}

/** One router (or replica): its own view of each worker, its index and its scheduler. */
interface ReplayRouter {
  readonly name: string;
  readonly workers: ReplayWorker[];
  readonly approximate: ApproximateIndex;
  index: PrefixIndex;
  decider: Scheduler | undefined;
  readonly peers: PeerPending;
  /** Sequence number of its last op (state-op.ts nextStamp). */
  seq: number;
  /** In flight per worker as each peer last reported it. */
  readonly peerCounts: Map<string, readonly number[]>;
}

export async function replay(
  w: PreparedWorkload,
  o: {
    workers: number;
    concurrency: number;
    chooser: Chooser;
    /** Requests (by spec id) sent to a given worker whatever the chooser says (what-if analysis). */
    force?: ReadonlyMap<string, number>;
    /**
     * The router's engine poll (--engine-poll-interval-secs), in model ms: every worker's waiting
     * queue is sampled when the run starts and then every `enginePollMs` into the router's own
     * EngineSignals, and policies read the last sample (foreignQueuedAt) until it is 3 intervals
     * old, as src/workers/introspection.ts does. Off by default.
     */
    enginePollMs?: number;
    /** Model ms into the first interval at which the run starts (the poll timer's phase). */
    enginePollPhaseMs?: number;
    /**
     * Count the foreign queue against the router's pending requests now instead of at the read
     * (how prefix_cost did it before 2026-11-23), to measure what that cost.
     */
    foreignAgainstNow?: boolean;
    /** Records every decision and its outcome (--decision-trace's format). */
    trace?: DecisionTrace;
    /**
     * Timing noise: every engine step (and first-token delay) lasts 1 ± `share` times its model
     * time, drawn from `seed` per worker. The same workload under other seeds is what identical
     * real-time runs are: the same requests, steps a little faster or slower.
     */
    jitter?: { seed: number; share: number };
    /** Several replicas sharing state instead of one router (ReplicaModel). */
    replicas?: ReplicaModel;
    /** Filled with where the replicas' decisions differ from one router's (replicas only). */
    attribution?: ReplicaAttribution;
  },
): Promise<ReplayResult> {
  const clock = new ManualClock();
  const timing = DEFAULT_TIMING;
  const chooser = o.chooser;
  const precise =
    chooser.kind === "precise"
      ? new PreciseIndex({
          maxBlocksPerWorker: PRECISE_MAX_BLOCKS,
          speculativeTtlMs: PRECISE_SPECULATIVE_TTL_MS,
          tierWeights: chooser.tierWeights,
          now: () => clock.now(),
        })
      : undefined;
  if (o.replicas !== undefined && chooser.kind === "precise")
    throw new Error("the replay models replicas over the approximate index only");
  const claimStore = new Map<string, { value: string; until: number }>();
  const engines: { engine: Engine; steps: Step[] }[] = [];
  for (let i = 0; i < o.workers; i++) {
    const steps: Step[] = [];
    const jitter = o.jitter;
    const rng = jitter === undefined ? undefined : mulberry32((jitter.seed * 977 + i) >>> 0);
    const kv = new PrefixKvCache({
      capacityTokens: w.kvCapacityTokens,
      blockSize: BLOCK_SIZE,
      ...(w.cpuTierTokens !== undefined ? { cpuTierTokens: w.cpuTierTokens } : {}),
      ...(precise !== undefined ? { listener: eventsTo(precise, `w${i}`) } : {}),
    });
    const engine = new Engine(
      {
        timing,
        maxRunning: MAX_RUNNING,
        maxBatchTokens: MAX_BATCH_TOKENS,
        delayFactor: rng === undefined ? () => 1 : () => 1 + jitter!.share * (2 * rng() - 1),
        loadRule: loadRuleOf(w.flavor ?? DEFAULT_FLAVOR),
        onStep: (start: number, duration: number, shape: Readonly<StepShape>) =>
          steps.push({ start, end: start + duration, prefillTokens: shape.prefillTokens }),
      },
      kv,
      clock,
    );
    engines.push({ engine, steps });
  }
  const viewsOf = (): ReplayWorker[] =>
    engines.map(({ engine, steps }, i) => ({
      id: `w${i}`,
      index: i,
      ownInFlight: 0,
      peerInFlight: 0,
      get inFlight(): number {
        return this.ownInFlight + this.peerInFlight;
      },
      pendingPrefillChars: 0,
      pendingPrefillRequests: 0,
      peerChars: 0,
      peerRequests: 0,
      grantChars: 0,
      grantRequests: 0,
      get peerPendingPrefillChars(): number {
        return this.peerChars + this.grantChars;
      },
      get peerPendingPrefillRequests(): number {
        return this.peerRequests + this.grantRequests;
      },
      setPeerPendingPrefill(chars: number, requests: number): void {
        this.peerChars = chars;
        this.peerRequests = requests;
      },
      engine,
      steps,
      cpt: new CharsPerToken(),
      running: new RunningReserve(),
      get runningReserveChars(): number {
        return this.running.chars(this.cpt.value);
      },
      signals: new EngineSignals(),
    }));
  const capacity = Math.floor(w.kvCapacityTokens / BLOCK_SIZE) * BLOCK_SIZE;
  // The request being decided: the replay's tokenizer is the engines' own.
  let current: readonly number[] = [];
  const routers: ReplayRouter[] = [];
  const replicaCount = o.replicas?.count ?? 1;
  for (let r = 0; r < replicaCount; r++) {
    const workers = viewsOf();
    const approximate = new ApproximateIndex();
    const index =
      precise === undefined
        ? approximate
        : new HybridIndex(
            approximate,
            precise,
            {
              isLive: () => true,
              cached: () => current,
              tokenize: async () => current,
            },
            { tokenizeBudgetMs: 1000, defaultBlockSize: BLOCK_SIZE },
          );
    for (const worker of workers) {
      index.addWorker(worker.id);
      approximate.setBudget(worker.id, learnedTreeBudget(capacity, worker.cpt.value, 1));
    }
    const byId = new Map(workers.map((x) => [x.id, x]));
    routers.push({
      name: `r${r}`,
      workers,
      approximate,
      index,
      decider: undefined,
      peers: new PeerPending((id) => byId.get(id)),
      seq: 0,
      peerCounts: new Map(),
    });
  }
  const model = o.replicas;
  const attribution = model !== undefined && chooser.kind === "policy" ? o.attribution : undefined;
  // The fleet's tree for the attribution: every replica's op applied at once, as one router's.
  const fleetTree = attribution === undefined ? undefined : new ApproximateIndex();
  for (const worker of fleetTree === undefined ? [] : routers[0]!.workers) {
    fleetTree!.addWorker(worker.id);
    fleetTree!.setBudget(worker.id, learnedTreeBudget(capacity, worker.cpt.value, 1));
  }
  // Ops reach the fleet tree when the attribution next looks: a decision's own insert only after
  // the attribution has asked the fleet router, even when a claim's wait came in between.
  const fleetOps: StateOp[] = [];
  const applyFleet = (op: StateOp) => {
    if (op.kind === "truncate") fleetTree!.truncate(op.worker, op.model, op.text, op.keep);
    else if (op.kind === "insert") fleetTree!.insert(op.worker, op.model, op.text);
  };
  if (model !== undefined && chooser.kind !== "pinned") shareState(routers, model);
  for (const router of routers) {
    if (chooser.kind === "pinned") break;
    const rank = routers.indexOf(router);
    const policy = rank === 0 ? chooser.policy : model!.policyOf(rank);
    const claims = model !== undefined && model.claimTtlMs > 0 ? claimsOf(model) : undefined;
    router.decider = new Scheduler(policy, router.index, undefined, claims);
    router.decider.trace = o.trace;
    if (model !== undefined) {
      router.decider.replicaRank = () => rank;
      router.decider.rankHoldMs = model.rankHoldMs;
      router.decider.wait = (ms) => new Promise<void>((resolve) => clock.setTimer(resolve, ms));
    }
  }
  const pollMs = o.enginePollMs;
  if (pollMs !== undefined && pollMs > 0) {
    const sample = () => {
      for (const router of routers) {
        for (const worker of router.workers) {
          const load = {
            queued: worker.engine.waiting,
            running: undefined,
            kvUsage: undefined,
            routerPending: worker.pendingPrefillRequests,
            peerPending: worker.peerPendingPrefillRequests,
          };
          worker.signals.recordLoad(load, clock.now());
        }
      }
    };
    sample();
    const tick = () => {
      sample();
      clock.setTimer(tick, pollMs);
    };
    clock.setTimer(tick, pollMs - (o.enginePollPhaseMs ?? 0));
    for (const router of routers) {
      for (const worker of router.workers) {
        const signals = worker.signals;
        signals.staleAfterMs = STALE_AFTER_INTERVALS * pollMs;
        // The policy passes wall-clock time; the replay judges the reading in model time.
        worker.foreignQueuedAt = () => {
          const now = clock.now();
          if (!o.foreignAgainstNow) return signals.foreignQueued(now);
          // For comparison: against the router's pending requests now instead of at the read.
          const queued = signals.load(now)?.queued;
          return queued === undefined
            ? undefined
            : foreignQueued(queued, worker.pendingPrefillRequests);
        };
      }
    }
  }

  /**
   * The replicas' shared state in model time: ops to the peers' inner indexes and queued prefill,
   * load reports every interval (ReplicaModel).
   */
  function shareState(all: ReplayRouter[], m: ReplicaModel): void {
    const ttlMs = 3 * m.loadIntervalMs;
    for (const from of all) {
      const publish = (op: StateOp) => {
        if (op.kind !== "insert" && op.kind !== "truncate") return;
        if (fleetTree !== undefined) fleetOps.push(op);
        const seq = ++from.seq;
        for (const to of all) {
          if (to === from) continue;
          const deliver = () => {
            if (op.kind === "truncate") {
              to.approximate.truncate(op.worker, op.model, op.text, op.keep);
              return;
            }
            to.approximate.insert(op.worker, op.model, op.text);
            if (op.uncached !== undefined)
              to.peers.decided(from.name, ttlMs, op.worker, op.uncached, seq, clock.now());
          };
          after(m.delayMs, deliver);
        }
      };
      from.index = new PublishingIndex(from.approximate, publish, MAX_SHARED_TEXT_CHARS);
      const report = () => {
        const covers = from.seq;
        const counts = from.workers.map((x) => x.ownInFlight);
        const pending = new Map<string, PendingLoad>();
        for (const x of from.workers) {
          if (x.pendingPrefillRequests > 0)
            pending.set(x.id, { chars: x.pendingPrefillChars, requests: x.pendingPrefillRequests });
        }
        for (const to of all) {
          if (to === from) continue;
          after(m.delayMs, () => {
            to.peerCounts.set(from.name, counts);
            for (const x of to.workers) {
              let sum = 0;
              for (const c of to.peerCounts.values()) sum += c[x.index] ?? 0;
              x.peerInFlight = sum;
            }
            to.peers.reported(from.name, ttlMs, pending, covers, clock.now());
            if (to === all[0]) coverGrants(from.name, covers);
          });
        }
        clock.setTimer(report, m.loadIntervalMs);
      };
      // Each replica's timer has its own phase.
      clock.setTimer(report, (m.loadIntervalMs * (all.indexOf(from) + 1)) / (all.length + 1));
    }
  }

  /** Claims where every replica's meet: the first to arrive holds the key for the TTL. */
  function claimsOf(m: ReplicaModel): PrefixClaims {
    return {
      claim: (key, value) =>
        new Promise<string | undefined>((resolve) => {
          after(m.delayMs, () => {
            const now = clock.now();
            let held = claimStore.get(key);
            if (held === undefined || held.until <= now) {
              held = { value, until: now + m.claimTtlMs };
              claimStore.set(key, held);
            }
            const holder = held.value;
            after(m.delayMs, () => resolve(holder));
          });
        }),
    };
  }

  /**
   * `run` after `ms` model ms; at 0 at once, before any other decision: what sharing could give
   * at best (decisions a batch's completions release in the same instant see each other's).
   */
  function after(ms: number, run: () => void): void {
    if (ms > 0) clock.setTimer(run, ms);
    else run();
  }
  const shadows = attribution === undefined ? [] : routers.map((r, rank) => attributor(r, rank));

  /**
   * The attribution's three counterfactual routers for one replica, each with a policy of its own
   * (a rotation's turns stay the replica's): the fleet's tree and load, the fleet's tree only, the
   * fleet's load only. `before` asks them ahead of the replica's decision, `after` counts it.
   */
  function attributor(router: ReplayRouter, rank: number) {
    const a = attribution!;
    const sum = (i: number, f: (x: ReplayWorker) => number) =>
      routers.reduce((s, r) => s + f(r.workers[i]!), 0);
    const fleetLoad: PolicyWorker[] = router.workers.map((x) => ({
      id: x.id,
      get inFlight() {
        return sum(x.index, (y) => y.ownInFlight);
      },
      get pendingPrefillChars() {
        return sum(x.index, (y) => y.pendingPrefillChars);
      },
      get pendingPrefillRequests() {
        return sum(x.index, (y) => y.pendingPrefillRequests);
      },
      get runningReserveChars() {
        return x.runningReserveChars;
      },
      ...(x.foreignQueuedAt !== undefined ? { foreignQueuedAt: x.foreignQueuedAt } : {}),
    }));
    const made = (index: PrefixIndex) => {
      const s = new Scheduler(model!.policyOf(rank), index) as unknown as {
        choose(
          c: readonly PolicyWorker[],
          r: { text: string },
        ): { worker: PolicyWorker } | undefined;
        matched: number[];
        replicaRank: () => number;
      };
      s.replicaRank = () => rank;
      return s;
    };
    // Matching reserves room for the running requests in the tree it reads: the shadows must not
    // change what the replica's own tree holds, nor the fleet tree's by a replica's own counts.
    const readOnly = (index: ApproximateIndex): PrefixIndex =>
      Object.assign(Object.create(index) as ApproximateIndex, { reserve: undefined });
    const both = made(fleetTree!);
    const treeOnly = made(readOnly(fleetTree!));
    const loadOnly = made(readOnly(router.approximate));
    const own = made(readOnly(router.approximate));
    const pick = (s: ReturnType<typeof made>, c: readonly PolicyWorker[], text: string) =>
      c.indexOf(s.choose(c, { text })?.worker ?? c[0]!);
    return {
      before(candidates: readonly ReplayWorker[], text: string): Counterfactual {
        for (const op of fleetOps.splice(0)) applyFleet(op);
        const views = candidates.map((x) => fleetLoad[x.index]!);
        const fleet = pick(both, views, text);
        const held = both.matched.slice(0, candidates.length);
        const most = Math.max(...held);
        let kind = held.every((h) => h >= most - CLAIM_BLOCK_CHARS) ? "new" : "held";
        own.choose(candidates, { text });
        const mine = own.matched.slice(0, candidates.length);
        // Where the replica's tree and the fleet's part: a peer's insert not here yet (less), or
        // what this tree still holds and the fleet's lost (more).
        const less = held.some((h, i) => h > (mine[i] ?? 0) + CLAIM_BLOCK_CHARS);
        const more = held.some((h, i) => h + CLAIM_BLOCK_CHARS < (mine[i] ?? 0));
        kind += less && more ? ":both" : less ? ":less" : more ? ":more" : "";
        return {
          at: clock.now(),
          fleet: candidates[fleet]!.index,
          tree: candidates[pick(treeOnly, candidates, text)]!.index,
          load: candidates[pick(loadOnly, views, text)]!.index,
          own: candidates[pick(own, candidates, text)]!.index,
          kind,
          held: new Map(candidates.map((x, i) => [x.index, held[i] ?? 0])),
        };
      },
      after(
        first: Counterfactual,
        candidates: readonly ReplayWorker[],
        text: string,
        chosen: number,
      ) {
        // Everything published meanwhile but this decision's own insert, then the fleet router
        // asked again when a claim's wait let the fleet move on.
        const ops = fleetOps.splice(0);
        const id = `w${chosen}`;
        let mine = -1;
        for (let k = ops.length - 1; k >= 0 && mine < 0; k--) {
          const op = ops[k]!;
          if (op.kind === "insert" && op.worker === id && op.text === text) mine = k;
        }
        const waited = ops.length > (mine < 0 ? 0 : 1) || clock.now() !== first.at;
        for (let k = 0; k < ops.length; k++) if (k !== mine) applyFleet(ops[k]!);
        // The replica's own tree now holds this decision: only the fleet router is asked again.
        const f = waited ? this.before(candidates, text) : first;
        if (mine >= 0) applyFleet(ops[mine]!);
        a.decisions += 1;
        if (chosen === f.fleet) {
          a.agree += 1;
          return;
        }
        // Its own view agreed, yet it chose otherwise: a claim's answer (or a hold) moved it.
        const cause = waited
          ? "wait"
          : f.own === f.fleet
            ? "claim"
            : f.tree === f.fleet && f.load === f.fleet
              ? "either"
              : f.tree === f.fleet
                ? "tree"
                : f.load === f.fleet
                  ? "load"
                  : "tree+load";
        if (waited) f.kind = f.kind.split(":")[0]!;
        const key = `${f.kind}/${cause}`;
        const e = a.differ.get(key) ?? { count: 0, lostChars: 0 };
        e.count += 1;
        e.lostChars += (f.held.get(f.fleet) ?? 0) - (f.held.get(chosen) ?? 0);
        a.differ.set(key, e);
      },
    };
  }
  const spread = mulberry32(((model?.seed ?? 0) * 7919 + 17) >>> 0);

  /** The replica that decides a request `reached` received (ReplicaDecider). */
  function deciderOf(
    how: ReplicaDecider,
    reached: ReplayRouter,
    spec: RequestSpec,
    text: string,
  ): ReplayRouter {
    if (how === "leader") return routers[0]!;
    if (how === "tenant")
      return spec.group === undefined ? reached : ownerOf(String(spec.group), 0);
    const held: number[] = [];
    reached.index.match(text, undefined, reached.workers, held);
    if (how === "leader-new")
      return newPrefixClaimEnd(text.length, held, held.length) >= 0 ? routers[0]! : reached;
    const all = Math.min(...held);
    return ownerOf(text, all - (all % KEY_ALIGN));
  }

  /** The rendezvous winner among the replicas of the key of `text` from `from`. */
  function ownerOf(text: string, from: number): ReplayRouter {
    const key = prefixKey(text, from);
    let best = routers[0]!;
    let top = -1;
    for (const r of routers) {
      const score = rendezvousScore(key, r.name);
      if (score > top) {
        top = score;
        best = r;
      }
    }
    return best;
  }

  // leader-built: the grants the leader counts, where it sent each new prefix lately, each
  // replica's asks in progress by prefix, and the decisions whose request the leader counts as
  // its own (leaderCounts).
  const grants: Grant[] = [];
  const remembered = new Map<string, { value: string; until: number }>();
  const asking = new Map<ReplayRouter, Map<string, Promise<unknown>>>();
  const countedAtLeader = new WeakMap<object, number>();

  function countGrant(g: Grant, sign: 1 | -1): void {
    const w = g.worker;
    if (g.own) {
      w.ownInFlight += sign;
      w.pendingPrefillChars += sign * g.chars;
      w.pendingPrefillRequests += sign;
    } else {
      w.grantChars += sign * g.chars;
      w.grantRequests += sign;
    }
  }

  function dropGrant(g: Grant): void {
    const k = grants.indexOf(g);
    if (k < 0) return;
    countGrant(g, -1);
    grants.splice(k, 1);
  }

  /** A report of `asker` covering its ops up to `covers` reached the leader. */
  function coverGrants(asker: string, covers: number): void {
    for (const g of grants.filter((x) => x.asker === asker && x.seq <= covers)) dropGrant(g);
  }

  /** The worker the leader last gave the prefix `key`, and what `text` shares with that text. */
  function recalled(key: string, text: string): { worker: string; shared: number } | undefined {
    const r = remembered.get(key);
    if (r === undefined || r.until <= clock.now()) return undefined;
    const read = readNewPrefixClaim(r.value, text);
    return read === undefined ? undefined : { worker: read.worker, shared: read.shared };
  }

  function remember(key: string, worker: string, text: string, m: ReplicaModel): void {
    remembered.set(key, {
      value: newPrefixClaimValue(worker, 0, text),
      until: clock.now() + m.claimTtlMs,
    });
  }

  /** The policy's choice at `s` with each candidate taken to hold `held[i]`. */
  function selectHolding<W extends PolicyWorker>(
    s: SchedulerSteps,
    candidates: readonly W[],
    text: string,
    held: readonly number[],
  ): RouteDecision<W> | undefined {
    return s.policy.select(candidates, {
      ...s.routeRequest({ text }, true, undefined),
      matched: held,
    });
  }

  /** A decision at `router` as the built leader took it, or with leader-new's ways (switches). */
  function builtDecide(
    router: ReplayRouter,
    candidates: readonly ReplayWorker[],
    text: string,
    m: ReplicaModel,
  ): Decision<ReplayWorker> | undefined | Promise<Decision<ReplayWorker> | undefined> {
    const sw = m.built ?? {};
    const s = router.decider as unknown as SchedulerSteps;
    const request = { text };
    const first = s.choose(candidates, request);
    if (first === undefined) return undefined;
    const n = candidates.length;
    const end = newPrefixClaimEnd(text.length, s.matched, n);
    if (end < 0) return s.record(candidates, request, first, s.matched, s.fill);
    const key = newPrefixClaimKey(undefined, text, end);
    if (router === routers[0]) {
      // The leader's own: at once, on its view plus where it sent the prefix lately.
      const given = sw.ownTree || sw.leaderRecords ? undefined : recalled(key, text);
      const i = given === undefined ? -1 : candidates.findIndex((c) => c.id === given.worker);
      let chosen = first;
      if (i >= 0 && candidates[i] !== first.worker) {
        const assumed = s.matched.slice(0, n);
        assumed[i] = Math.max(assumed[i] ?? 0, end, given!.shared);
        const again = selectHolding(s, candidates, text, assumed) ?? first;
        chosen = {
          ...again,
          matchRate: (s.matched[candidates.indexOf(again.worker)] ?? 0) / text.length,
        };
      }
      if (!sw.ownTree && !sw.leaderRecords) remember(key, chosen.worker.id, text, m);
      return s.record(candidates, request, chosen, s.matched, s.fill);
    }
    const mine = asking.get(router) ?? new Map<string, Promise<unknown>>();
    asking.set(router, mine);
    const ahead = sw.askEach ? undefined : mine.get(key);
    const decided =
      ahead === undefined
        ? ask(
            router,
            candidates,
            text,
            first,
            s.matched.slice(0, n),
            s.fill.slice(0, n),
            key,
            end,
            m,
          )
        : ahead
            .then(() => new Promise((resolve) => setImmediate(resolve)))
            .then(() => router.decider!.decide(candidates, request));
    const settled = decided.then(() => undefined);
    mine.set(key, settled);
    void settled.then(() => {
      if (mine.get(key) === settled) mine.delete(key);
    });
    return decided;
  }

  /**
   * A follower's ask of the leader (builtDecide): `first` its own choice, `matched` and `fill` its
   * view of the candidates at the ask.
   */
  async function ask(
    router: ReplayRouter,
    candidates: readonly ReplayWorker[],
    text: string,
    first: RouteDecision<ReplayWorker>,
    matched: readonly number[],
    fill: readonly number[],
    key: string,
    end: number,
    m: ReplicaModel,
  ): Promise<Decision<ReplayWorker> | undefined> {
    const sw = m.built ?? {};
    const leader = routers[0]!;
    const legs = (k: number) =>
      new Promise<void>((resolve) => clock.setTimer(resolve, k * m.delayMs));
    const askedAt = router.seq + 1;
    await legs(2);
    const views = candidates.map((c) => leader.workers[c.index]!);
    const granted = grantAt(leader, views, text, matched, key, end, m);
    let g: Grant | undefined;
    if (granted !== undefined) {
      g = {
        asker: router.name,
        worker: granted.worker,
        chars: Math.max(0, text.length - granted.held),
        own: sw.leaderRecords === true,
        // The leader's own decision stands for a request not dispatched yet: no report covers it
        // before the asker's dispatch marks it (below).
        seq: sw.leaderRecords ? Number.POSITIVE_INFINITY : askedAt,
      };
      grants.push(g);
      countGrant(g, 1);
    }
    await legs(2);
    const j = g === undefined ? -1 : candidates.findIndex((c) => c.index === g.worker.index);
    const decision: RouteDecision<ReplayWorker> =
      j < 0 || candidates[j] === first.worker
        ? first
        : {
            worker: candidates[j]!,
            branch: "peer_claim",
            matchRate: (matched[j] ?? 0) / text.length,
          };
    const s = router.decider as unknown as SchedulerSteps;
    // The leader's op carries the insert to every replica, this one too (leaderRecords): the
    // asker takes the grant without touching its index.
    const recorded =
      g !== undefined && sw.leaderRecords
        ? {
            ...decision,
            index: "approximate",
            heldBefore: matched[j] ?? 0,
            available: Math.max(...matched),
            runnerUp: undefined,
            runnerUpHeld: 0,
            lossReason: null,
            othersPrefilling: granted!.othersPrefilling,
          }
        : s.record(candidates, { text }, decision, matched, fill);
    if (g === undefined) return recorded;
    // A mark that the asker's next report, sent after this dispatch, covers.
    if (sw.leaderRecords) g.seq = ++router.seq;
    if (sw.leaderCounts) {
      dropGrant(g);
      countedAtLeader.set(recorded, granted!.held);
    }
    return recorded;
  }

  /** The leader's grant on an ask: the worker and what it held of the text there. */
  function grantAt(
    leader: ReplayRouter,
    views: readonly ReplayWorker[],
    text: string,
    matched: readonly number[],
    key: string,
    end: number,
    m: ReplicaModel,
  ): { worker: ReplayWorker; held: number; othersPrefilling: boolean } | undefined {
    const sw = m.built ?? {};
    if (sw.leaderRecords) {
      const d = leader.decider!.decide(views, { text });
      return d === undefined
        ? undefined
        : { worker: d.worker, held: d.heldBefore, othersPrefilling: d.othersPrefilling === true };
    }
    const l = leader.decider as unknown as SchedulerSteps;
    if (sw.ownTree) {
      const d = l.choose(views, { text });
      if (d === undefined) return undefined;
      const held = l.matched[views.indexOf(d.worker)] ?? 0;
      leader.approximate.insert(d.worker.id, undefined, text);
      return { worker: d.worker, held, othersPrefilling: false };
    }
    // The asker's matched lengths, the remembered worker holding what the texts share; the
    // leader's fills (an empty text matches nothing).
    l.prefix.match({ text: "" }, views, l.matched, l.fill);
    const given = recalled(key, text);
    const held = views.map((v, i) =>
      v.id === given?.worker
        ? Math.min(text.length, Math.max(matched[i] ?? 0, end, given.shared))
        : (matched[i] ?? 0),
    );
    const d = selectHolding(l, views, text, held);
    if (d === undefined) return undefined;
    remember(key, d.worker.id, text, m);
    return { worker: d.worker, held: held[views.indexOf(d.worker)] ?? 0, othersPrefilling: false };
  }

  const done = new Map<string, () => void>();
  const finished = new Map<string, Promise<void>>();
  for (const spec of w.specs) {
    finished.set(spec.id, new Promise<void>((resolve) => done.set(spec.id, resolve)));
  }
  const byTurn = new Map<string, string>();
  for (const spec of w.specs) {
    if (spec.conversation !== undefined) byTurn.set(`${spec.conversation}/${spec.turn}`, spec.id);
  }
  const results: ReplayedRequest[] = [];
  const rejected: ReplayedRejection[] = [];

  const send = async (spec: RequestSpec): Promise<void> => {
    const body = openAiBody(spec) as Record<string, unknown>;
    const text = routingText(spec.kind === "chat" ? "chat" : "completions", body);
    const prompt = spec.kind === "chat" ? renderChat(spec.messages ?? []) : (spec.prompt ?? "");
    const tokens = tokenize(prompt);
    current = tokens;
    // The balancer in front of the replicas spreads at random.
    let router =
      routers.length === 1 ? routers[0]! : routers[Math.floor(spread() * routers.length)]!;
    const arrival = clock.now();
    const built = model?.decider === "leader-built";
    const elsewhere =
      model?.decider === undefined || built ? router : deciderOf(model.decider, router, spec, text);
    // The ask and its answer each take two legs, the decider's counts end one leg late.
    const hop = elsewhere === router ? 0 : 2 * model!.delayMs;
    if (hop > 0) await new Promise<void>((resolve) => clock.setTimer(resolve, hop));
    router = elsewhere;
    const { workers, index } = router;
    let decider = router.decider;
    let worker: ReplayWorker;
    let held = 0;
    // How late the counts of this request end where they are kept (a decider hears one leg late).
    let lag = hop / 2;
    let decision: ReturnType<Scheduler["decide"]> | undefined;
    if (chooser.kind === "pinned") {
      worker = workers[chooser.workerOf(spec, o.workers)]!;
    } else {
      const forced = o.force?.get(spec.id);
      const candidates = forced === undefined ? workers : [workers[forced]!];
      // Tokens are at hand: the precise index's prepare completes at once.
      if (index instanceof HybridIndex)
        void index.prepare({ text, tokenizeInput: { tokens } }, candidates);
      const shadow = attribution === undefined ? undefined : shadows[routers.indexOf(router)]!;
      const fleet = shadow?.before(candidates, text);
      // Replicas agree on a new prefix (a claim, in model time); one router decides at once.
      decision = built
        ? await builtDecide(router, candidates, text, model!)
        : model === undefined || model.decider !== undefined
          ? decider!.decide(candidates, { text })
          : await decider!.decideAgreed(candidates, { text });
      worker = decision!.worker as ReplayWorker;
      held = decision!.heldBefore;
      if (fleet !== undefined) shadow!.after(fleet, candidates, text, worker.index);
      // leaderCounts: the leader counts it, with what its own tree held there, and learns from
      // its outcome.
      const leaderHeld = decision === undefined ? undefined : countedAtLeader.get(decision);
      if (leaderHeld !== undefined) {
        router = routers[0]!;
        decider = router.decider;
        worker = router.workers[worker.index]!;
        held = leaderHeld;
        lag = model!.delayMs;
      }
    }
    // A sequence larger than the whole KV pool is refused up front, as the engines do: SGLang
    // aborts a request at or above max_req_input_len (at most max_total_num_tokens − 1) with
    // 400 (python/sglang/srt/managers/utils.py validate_input_length, scheduler.py), and vLLM
    // refuses at start-up a KV pool smaller than one max_model_len sequence, so that a prompt
    // beyond max_model_len gets 400 (vllm/v1/engine/processor.py). The simulator's HTTP worker
    // answers 400 (sim/worker.ts); the run goes on, the client counts an error, and the router
    // takes its insert back (Scheduler.rejected), as the forwarder does on an error status.
    if (!worker.engine.fits(tokens.length, spec.maxTokens)) {
      if (decision !== undefined) decider!.rejected(decision, { text });
      rejected.push({
        spec,
        worker: worker.index,
        promptTokens: tokens.length,
        error: `prompt (${tokens.length} tokens) + max tokens (${spec.maxTokens}) exceed the KV cache capacity (${capacity} tokens)`,
      });
      return;
    }
    await new Promise<void>((resolve) => {
      // Read at the decision, as the router reads it (Scheduler.record; pinned: this router's own).
      const othersPrefilling = decision?.othersPrefilling ?? worker.pendingPrefillRequests > 0;
      const uncachedChars = Math.max(0, text.length - held);
      worker.ownInFlight++;
      worker.pendingPrefillChars += uncachedChars;
      worker.pendingPrefillRequests++;
      let admitted = arrival;
      let cached = 0;
      let firstToken = Number.NaN;
      after(hop, () =>
        worker.engine.submit({
          promptTokens: tokens,
          maxTokens: spec.maxTokens,
          sink: {
            onAdmit: (c) => {
              admitted = clock.now();
              cached = c;
            },
            onToken: (i) => {
              if (i !== 0) return;
              firstToken = clock.now();
              after(lag, () => {
                worker.pendingPrefillChars -= uncachedChars;
                worker.pendingPrefillRequests--;
              });
            },
            onFinish: () => {
              after(lag, () => worker.ownInFlight--);
              // The router learns the output from the engine's usage (Worker.running).
              worker.running.observe(spec.maxTokens);
              const uncached = tokens.length - cached;
              const own = (uncached * 1000) / timing.prefillTokensPerSec;
              let stepsPrefill = 0;
              for (const step of worker.steps) {
                if (step.start >= admitted - 1e-9 && step.end <= firstToken + 1e-9)
                  stepsPrefill += step.prefillTokens;
              }
              const others =
                (Math.max(0, stepsPrefill - uncached) * 1000) / timing.prefillTokensPerSec;
              const ttft = firstToken - arrival;
              const wait = admitted - arrival;
              results.push({
                spec,
                worker: worker.index,
                promptTokens: tokens.length,
                cachedTokens: cached,
                arrival,
                admitted,
                firstToken,
                ttft,
                wait,
                own,
                others,
                rest: Math.max(0, ttft - wait - own - others),
                alone: estimateLatency(timing, {
                  promptTokens: tokens.length,
                  cachedTokens: cached,
                  outputTokens: 1,
                  maxBatchTokens: MAX_BATCH_TOKENS,
                }).ttftMs,
                matchedChars: held,
              });
              // The router's usage feedback (scheduling/usage-feedback.ts): learn characters per token,
              // trim the index when the engine held clearly less than it claimed.
              if (decider !== undefined && decision !== undefined) {
                decider.outcome(decision, tokens.length, cached);
                worker.cpt.observe(text.length, tokens.length);
                router.approximate.setBudget(
                  worker.id,
                  learnedTreeBudget(capacity, worker.cpt.value, 1),
                );
                fleetTree?.setBudget(worker.id, learnedTreeBudget(capacity, worker.cpt.value, 1));
                if (!othersPrefilling) {
                  const engineHeld = engineHeldChars(
                    held,
                    cached,
                    tokens.length,
                    text.length,
                    worker.cpt.value,
                  );
                  if (engineHeld !== undefined) decider.reported(decision, { text }, engineHeld);
                }
              }
              resolve();
            },
          },
        }),
      );
    });
  };

  let next = 0;
  const lane = async () => {
    while (next < w.specs.length) {
      const spec = w.specs[next++]!;
      const previous =
        spec.turn !== undefined ? byTurn.get(`${spec.conversation}/${spec.turn - 1}`) : undefined;
      if (previous !== undefined) await finished.get(previous);
      await send(spec);
      done.get(spec.id)?.();
    }
  };
  const lanes = Promise.all(Array.from({ length: Math.min(o.concurrency, w.specs.length) }, lane));
  let settled = false;
  let failure: unknown;
  lanes.then(
    () => {
      settled = true;
    },
    (err: unknown) => {
      // A throw in a lane ends the run with it, never a wait on timers that never stop (the poll).
      settled = true;
      failure = err;
    },
  );
  for (;;) {
    // Let every promise continuation run before time moves on (a replica's request queued behind
    // its own claim decides in the turn after the earlier one: scheduler.ts afterDispatch).
    for (let turn = 0; turn < (model === undefined ? 1 : 3); turn++)
      await new Promise((resolve) => setImmediate(resolve));
    if (settled) break;
    if (!clock.fireNext()) {
      await new Promise((resolve) => setImmediate(resolve));
      if (settled) break;
      throw new Error("replay stalled: no timer left and requests outstanding");
    }
  }
  if (failure !== undefined) throw failure;
  const perWorker = engines.map((_, i) => results.filter((r) => r.worker === i).length);
  const prompt = results.reduce((s, r) => s + r.promptTokens, 0);
  const cachedTotal = results.reduce((s, r) => s + r.cachedTokens, 0);
  return {
    requests: results,
    rejected,
    perWorker,
    hitRate: prompt === 0 ? 0 : cachedTotal / prompt,
  };
}
