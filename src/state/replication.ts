import type { Registry } from "prom-client";
import type { PrefixClaims } from "../index/prefix-claims.js";
import type { PrefixIndex } from "../index/prefix-index.js";
import type { Logger } from "../logger.js";
import type { WorkerRegistry } from "../workers/registry.js";
import type { Worker } from "../workers/worker.js";
import { type LeaderView, type LoadWorker, leadsPeers } from "./load-sync.js";
import { PeerInFlight, type PeerSource } from "./peer-in-flight.js";
import { PeerPending } from "./peer-pending.js";
import { PublishingIndex } from "./publishing-index.js";
import { ReplicatedMembership } from "./replicated-membership.js";
import type { StateOp } from "./state-op.js";

/**
 * One way replicas reach each other: Redis streams across hosts (state/redis-transport.ts), or
 * radixgate-cluster's local channel on one host (state/cluster-transport.ts). Each carries the
 * same things: this replica's ops out (decisions, and the worker set's changes when it carries
 * them), peers' ops in, new-prefix claims, and in-flight counts both ways.
 */
export interface Transport {
  /** Where its peers' in-flight counts are summed (both may be on: a cluster with --state-url). */
  readonly source: PeerSource;
  /** Longest routed text it carries (the first characters of a decision). */
  readonly maxTextChars: number;
  /** New-prefix claims over it (state/prefix-claims.ts); undefined when off. */
  readonly claims: PrefixClaims | undefined;
  /** One of this replica's ops, queued to leave; never blocks, never throws. */
  publish(op: StateOp): void;
  /** Connects it to this replica, once, before start(). */
  attach(side: ReplicaSide): void;
  /** The registry gained a worker (counts already heard for it apply now). */
  workerAdded?(): void;
  /**
   * This replica's rank among the replicas it reaches (0 for the first, or alone): stable while
   * they are, the same order on every replica. Undefined until known.
   */
  rank?(): number | undefined;
  /**
   * The first-started live replica and where it says peers reach it (--state-advertise-url):
   * the same on every replica. Undefined until known, or on a transport that carries no URLs.
   */
  leader?(): LeaderView | undefined;
  /** Connects, and replays what its peers decided before this replica serves (bounded wait). */
  start(): Promise<void>;
  stop(): Promise<void> | void;
}

/** Where a peer's decision comes from, for counting the prefill it queued (peer-pending.ts). */
export interface OpOrigin {
  /** The peer, named so that no two transports' peers share a name. */
  readonly peer: string;
  /** How long its decisions count without a report of it covering them. */
  readonly ttlMs: number;
  /** The op's sequence number among the peer's (Redis); absent on an ordered channel. */
  readonly seq?: number;
  /** When the peer sent it (epoch ms, its clock), when known: a replayed old op queues nothing. */
  readonly at?: number;
}

/** What a transport gets of this replica. */
export interface ReplicaSide {
  readonly registry: WorkerRegistry;
  readonly metricsRegistry: Registry | undefined;
  /** The worker set, when this transport carries it (one does); else undefined. */
  readonly membership: ReplicatedMembership | undefined;
  /** A peer's op, applied here (never published again); `origin`: who decided it. */
  receive(op: StateOp, origin?: OpOrigin): void;
  /** Peers' queued prefill: their load reports go here (their decisions come with receive). */
  readonly pending: PeerPending;
  /** The workers as load sharing sees them; each peer count set goes to this transport's part. */
  loadWorkers(): readonly LoadWorker[];
  /** Resolves once the peers' changes received so far are applied (their workers' adds done). */
  settled(): Promise<void>;
  /** The index below every publishing layer (what a snapshot is taken of and loaded into). */
  localIndex(): PrefixIndex | undefined;
}

/** Peers' decisions held while a peer's new worker is being added (then applied; past it, dropped). */
const MAX_HELD_OPS = 16_384;

export interface ReplicationDeps {
  readonly registry: WorkerRegistry;
  readonly logger: Logger;
  readonly metricsRegistry?: Registry;
  /** A worker a peer added (probed here before it takes traffic). */
  readonly onRemoteAdd?: (worker: Worker) => void;
}

/**
 * The one replication module: what this replica shares with its peers, whichever transports
 * carry it (one, or both in a radixgate-cluster with --state-url, where the processes of a host
 * share over their channel and reach other hosts through Redis, which leaves this host's
 * siblings out of what it reads so nothing arrives twice).
 *
 * - Decisions: every index insert and truncate is published on every transport (the publishing
 *   index); a peer's is applied to the index below every publishing layer, so nothing echoes.
 * - Worker set: one path (state/replicated-membership.ts), carried by the first transport
 *   (Redis when it is on). A peer's decisions that arrive while a worker it added is being added
 *   here wait for that worker, so none is dropped for a worker not there yet.
 * - Claims: those of the first transport that has them (Redis spans every host).
 * - Load: each transport sets its part of every worker's peer count; the worker gets the sum.
 * - Queued prefill: each peer's load reports and its decisions since (state/peer-pending.ts),
 *   whichever transport carries them; the worker gets the sum.
 * - Rank: this replica's place among its peers (the first transport's that knows it: Redis spans
 *   every host), where its rotations of equal candidates start (scheduling/rotation.ts).
 *
 * Transports are started and stopped one by one (assembly/lifecycle.ts declares them).
 */
export class Replication {
  readonly claims: PrefixClaims | undefined;
  private readonly peers = new PeerInFlight();
  private readonly pending: PeerPending;
  private inner: PrefixIndex | undefined;
  private membership: ReplicatedMembership | undefined;
  /** Workers a peer added that are not in the registry yet: their decisions wait for them. */
  private readonly awaited = new Set<string>();
  private held: [StateOp, OpOrigin | undefined][] = [];
  private settledWaiters: (() => void)[] = [];

  constructor(
    readonly transports: readonly Transport[],
    private readonly deps: ReplicationDeps,
  ) {
    this.claims = transports.find((t) => t.claims !== undefined)?.claims;
    this.pending = new PeerPending((id) => deps.registry.get(id));
  }

  /** This replica's rank among its peers (Transport.rank), 0 while none knows it. */
  rank(): number {
    for (const t of this.transports) {
      const rank = t.rank?.();
      if (rank !== undefined) return rank;
    }
    return 0;
  }

  /**
   * The leader as the first transport that knows it sees it; undefined while none does (the
   * cluster's channel carries no URLs: only Redis names one).
   */
  leader(): LeaderView | undefined {
    for (const t of this.transports) {
      const leader = t.leader?.();
      if (leader !== undefined) return leader;
    }
    return undefined;
  }

  /**
   * Where this replica relays the requests that start a new prefix: the leader's URL while both
   * advertise one and the leader is another replica; undefined = decide them here.
   */
  relayTarget(): string | undefined {
    const leader = this.leader();
    return leader !== undefined && !leader.self && leader.relaying ? leader.url : undefined;
  }

  /** This replica is the leader its peers relay new prefixes to: it decides them alone. */
  decidesAlone(): boolean {
    return leadsPeers(this.leader());
  }

  /** The index the router uses: `index`, publishing its decisions on every transport. */
  wrapIndex(index: PrefixIndex): PrefixIndex {
    this.inner = index;
    let outer = index;
    for (const t of this.transports)
      outer = new PublishingIndex(outer, (op) => t.publish(op), t.maxTextChars);
    return outer;
  }

  /**
   * Connects the transports to the registry: called once the index follows the registry, so a
   * peer's decision for a worker finds it in the index.
   */
  attach(): void {
    const { registry, logger, onRemoteAdd, metricsRegistry } = this.deps;
    const membership = new ReplicatedMembership(registry, logger, {
      ...(onRemoteAdd !== undefined ? { onRemoteAdd } : {}),
    });
    this.membership = membership;
    const carrier = this.transports[0];
    if (carrier !== undefined) membership.carryWith((change) => carrier.publish(change));
    registry.onChange((event, worker) => {
      if (event !== "added") return;
      for (const t of this.transports) t.workerAdded?.();
      this.pending.refresh(worker.id);
      if (this.awaited.delete(worker.url)) this.applyHeld();
    });
    for (const t of this.transports) {
      t.attach({
        registry,
        metricsRegistry,
        membership: t === carrier ? membership : undefined,
        receive: (op, origin) => this.receive(op, origin),
        pending: this.pending,
        loadWorkers: () => this.loadWorkers(t.source),
        settled: () => this.settled(),
        localIndex: () => this.inner,
      });
    }
  }

  /** A peer's op: a decision applied to the own index, or a change of the worker set. */
  private receive(op: StateOp, origin: OpOrigin | undefined): void {
    if (op.kind === "add" || op.kind === "remove") {
      this.memberChanged(op);
      return;
    }
    if (this.awaited.size > 0) {
      this.held.push([op, origin]);
      if (this.held.length > MAX_HELD_OPS) this.held.shift();
      return;
    }
    this.applyDecision(op, origin);
  }

  private applyDecision(op: StateOp, origin: OpOrigin | undefined): void {
    const inner = this.inner;
    if (inner === undefined || (op.kind !== "insert" && op.kind !== "truncate")) return;
    if (this.deps.registry.get(op.worker) === undefined) return;
    try {
      if (op.kind === "insert") inner.insert(op.worker, op.model, op.text);
      else inner.truncate(op.worker, op.model, op.text, op.keep);
    } catch (err) {
      this.deps.logger.warn({ err }, "a peer's decision could not be applied; skipped");
      return;
    }
    if (op.kind !== "insert" || op.uncached === undefined || origin === undefined) return;
    // A replayed decision from before this replica started queues nothing any longer.
    if (origin.at !== undefined && Date.now() - origin.at > origin.ttlMs) return;
    this.pending.decided(origin.peer, origin.ttlMs, op.worker, op.uncached, origin.seq);
  }

  private memberChanged(change: StateOp & { kind: "add" | "remove" }): void {
    const membership = this.membership;
    if (membership === undefined) return;
    if (change.kind === "add" && this.deps.registry.get(change.url) === undefined)
      this.awaited.add(change.url);
    membership
      .apply(change)
      .catch((err: unknown) =>
        this.deps.logger.warn({ err, url: change.url }, "a peer's membership change failed here"),
      )
      .finally(() => {
        // Refused or failed: nothing waits for it any longer.
        if (this.awaited.delete(change.url)) this.applyHeld();
      });
  }

  /** The held decisions, in order, once no peer's worker is awaited. */
  private applyHeld(): void {
    if (this.awaited.size > 0) return;
    const held = this.held;
    this.held = [];
    for (const [op, origin] of held) this.applyDecision(op, origin);
    const waiters = this.settledWaiters;
    this.settledWaiters = [];
    for (const resolve of waiters) resolve();
  }

  private settled(): Promise<void> {
    if (this.awaited.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.settledWaiters.push(resolve));
  }

  private loadWorkers(source: PeerSource): LoadWorker[] {
    const { peers } = this;
    return this.deps.registry.list().map((w) => ({
      id: w.id,
      ownInFlight: w.ownInFlight,
      ownPendingChars: w.pendingPrefillChars,
      ownPendingRequests: w.pendingPrefillRequests,
      setPeerInFlight: (n: number) => peers.set(source, w, n),
    }));
  }
}
