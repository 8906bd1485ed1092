import { Counter, type Registry } from "prom-client";
import type { PrefixClaims } from "../index/prefix-claims.js";
import type { PrefixIndex } from "../index/prefix-index.js";
import type { Logger } from "../logger.js";
import type { WorkerRegistry } from "../workers/registry.js";
import { roleFrom } from "../workers/worker-role.js";
import { BoundedQueue } from "./bounded-queue.js";
import type { PeerInFlight } from "./peer-in-flight.js";
import { PublishingIndex } from "./publishing-index.js";
import type { MemberChange, ReplicatedMembership } from "./replicated-membership.js";
import { SiblingClaims } from "./sibling-claims.js";
import type { SiblingTransport } from "./sibling-link.js";
import {
  MAX_OPS_PER_MESSAGE,
  readSiblingMessage,
  SIBLING_MAX_TEXT_CHARS,
  type SiblingMemberChange,
  type SiblingMessage,
} from "./sibling-messages.js";
import type { StateOp } from "./state-op.js";

export interface SiblingStateOptions {
  /** How long a new prefix's claim waits for the primary (then this process's choice stands). */
  claimTimeoutMs: number;
  /** How long a claim lives in the primary (long enough for the decision to reach every sibling). */
  claimTtlMs: number;
  /** Decisions waiting to leave while the channel is busy; past it the oldest are dropped. */
  queueSize: number;
  /** Where radixgate_cluster_dropped_total is registered (none in unit tests). */
  promRegistry?: Registry;
}

/**
 * How often the own in-flight counts are compared with what was last sent, to send them when they
 * changed without a decision (a request ending); a decision's message carries them anyway. Each
 * message costs tens of µs of CPU at each end (bench:cluster), so not every millisecond.
 */
const LOAD_CHECK_MS = 20;
/** Siblings' decision batches held while a sibling's new worker is being added (then applied). */
const MAX_HELD_BATCHES = 64;
/** How long start() waits for the primary's replay. */
const START_WAIT_MS = 3000;

/**
 * One process of radixgate-cluster sharing its routing decisions with its sibling processes over
 * the local channel (node:cluster IPC; the primary relays, state/sibling-hub.ts), without Redis:
 *
 * - every index insert and truncate (this process's decisions) is sent to the siblings, which
 *   apply it to their own index: every process's index sees every decision, a millisecond later;
 * - its in-flight counts per worker, whenever they change (checked every few ms), so each process
 *   weighs the host's whole load on a worker, not its own share;
 * - a new prefix (no worker singled out by the index) is claimed at the primary before the
 *   decision is recorded, so two processes routing the same new prefix at once agree on one
 *   worker (the decider's `decideAgreed`, as with Redis between hosts).
 *
 * Nothing waits on the channel on a request's path except a new prefix's claim (bounded). The
 * index's `applyTo` is the index below every publishing layer, so a sibling's op is neither sent
 * back nor published to Redis (the sibling published it there itself).
 */
export class SiblingState {
  readonly claims: PrefixClaims;
  private readonly siblingClaims: SiblingClaims;
  private inner: PrefixIndex | undefined;
  private registry: WorkerRegistry | undefined;
  private peers: PeerInFlight | undefined;
  private readonly queue: BoundedQueue<StateOp>;
  private flushing: NodeJS.Immediate | undefined;
  private loadTimer: NodeJS.Timeout | undefined;
  /** Own counts as last sent (worker id → count > 0). */
  private sent = new Map<string, number>();
  /** Each sibling's last counts, by its process id. */
  private readonly siblingCounts = new Map<number, Record<string, number>>();
  private readyResolve: (() => void) | undefined;
  private readonly ready = new Promise<void>((resolve) => {
    this.readyResolve = resolve;
  });
  private stopped = false;
  /** start() is over: this process's membership changes go to the siblings from now on. */
  private replayed = false;
  /** The worker set, when this channel carries it (no --state-url): sent and applied through it. */
  private membership: ReplicatedMembership | undefined;
  /** Workers a sibling added that are not in the registry yet: their decisions wait for them. */
  private readonly awaitedWorkers = new Set<string>();
  /** Decision batches waiting for those workers (bounded; the oldest dropped: hints). */
  private held: SiblingMessage[] = [];
  /** Ops dropped because the queue was full (tests, logs). */
  dropped = 0;
  /** Messages dropped on a full channel: this process's own, and the primary's to it. */
  private readonly droppedMessages: Counter<"where"> | undefined;
  /** Logged once per stall of the channel. */
  private stalled = false;

  constructor(
    private readonly transport: SiblingTransport,
    options: SiblingStateOptions,
    private readonly logger: Logger,
  ) {
    this.queue = new BoundedQueue(options.queueSize);
    this.droppedMessages =
      options.promRegistry === undefined
        ? undefined
        : new Counter({
            name: "radixgate_cluster_dropped_total",
            help: "radixgate-cluster: decision batches and load messages dropped because the local channel's backlog was full (where: sent by this process, or relayed to it by the primary while it did not read).",
            labelNames: ["where"],
            registers: [options.promRegistry],
          });
    this.siblingClaims = new SiblingClaims({
      timeoutMs: options.claimTimeoutMs,
      ttlMs: options.claimTtlMs,
      up: () => !this.stopped && transport.connected,
      send: (message) => transport.send(message),
    });
    this.claims = this.siblingClaims;
    transport.onMessage((raw) => this.receive(raw));
    transport.onClose(() => {
      this.siblingClaims.cancelAll();
      this.readyResolve?.();
    });
  }

  /**
   * The index the router uses: `index`, sending its decisions to the siblings. Their decisions
   * are applied to `applyTo` (the index below every publishing layer).
   */
  wrapIndex(index: PrefixIndex, applyTo: PrefixIndex = index): PrefixIndex {
    this.inner = applyTo;
    return new PublishingIndex(index, (op) => this.send(op), SIBLING_MAX_TEXT_CHARS);
  }

  /** The workers whose counts are shared, and where the siblings' counts go. */
  attach(registry: WorkerRegistry, peers: PeerInFlight): void {
    this.registry = registry;
    this.peers = peers;
    registry.onChange((event, worker) => {
      if (event !== "added") return;
      this.applyCounts();
      if (this.awaitedWorkers.delete(worker.url)) this.applyHeld();
    });
  }

  /**
   * Carries the worker set's changes over the channel: every add and remove of this process's
   * registry goes to the siblings, theirs are applied through `membership`. Not called with
   * --state-url: the worker set then travels through Redis, for the cluster's processes too.
   */
  carryMembership(membership: ReplicatedMembership): void {
    this.membership = membership;
    membership.carryWith((change) => this.sendMembership(siblingChange(change)));
  }

  /**
   * One of this process's membership changes, for the siblings (never dropped). Not before the
   * replay is over: the workers a process starts with (--worker-urls) are its own starting point,
   * not a change, and a replayed removal must win over them, as it does after a restart.
   */
  private sendMembership(change: SiblingMemberChange): void {
    if (this.stopped || !this.replayed) return;
    if (!this.transport.send({ rg: "sib", t: "member", change })) {
      this.logger.warn(
        { url: change.url, change: change.kind },
        "radixgate-cluster: the channel to the primary is closed; the other processes did not get this membership change",
      );
    }
  }

  /** Asks the primary for the recent decisions and waits (bounded) until they are applied. */
  async start(): Promise<void> {
    if (!this.transport.send({ rg: "sib", t: "hello" })) return;
    let timer: NodeJS.Timeout | undefined;
    const replayed = await Promise.race([
      this.ready.then(() => true),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), START_WAIT_MS);
      }),
    ]);
    clearTimeout(timer);
    this.replayed = true;
    this.loadTimer = setInterval(() => this.sendLoad(), LOAD_CHECK_MS);
    this.loadTimer.unref();
    this.logger.info(
      { siblings: this.siblingCounts.size, replayed },
      "sharing decisions with the other radixgate-cluster processes",
    );
  }

  stop(): void {
    this.stopped = true;
    clearInterval(this.loadTimer);
    if (this.flushing !== undefined) clearImmediate(this.flushing);
    this.flush();
    // Counts back to zero at the siblings: this process's requests are over.
    if (this.sent.size > 0) this.transport.send({ rg: "sib", t: "load", counts: {} });
    this.sent.clear();
    this.siblingClaims.cancelAll();
  }

  /** Queues one of this process's decisions; they leave together at the end of the turn. */
  private send(op: StateOp): void {
    if (this.stopped) return;
    if (!this.queue.push(op)) this.dropped += 1;
    this.flushing ??= setImmediate(() => {
      this.flushing = undefined;
      this.flush();
    });
  }

  /** The turn's decisions, with the counts when they changed, in as few messages as it takes. */
  private flush(): void {
    while (this.queue.size > 0) {
      const ops = this.queue.take(MAX_OPS_PER_MESSAGE);
      const counts = this.queue.size === 0 ? this.changedCounts() : undefined;
      const sent = this.transport.send({
        rg: "sib",
        t: "ops",
        ops,
        ...(counts !== undefined ? { counts: counts.record } : {}),
      });
      if (!sent) {
        this.noteUnsent();
        return;
      }
      this.stalled = false;
      if (counts !== undefined) this.sent = counts.map;
    }
  }

  /** Sends this process's in-flight counts when they changed since last sent (the timer's work). */
  private sendLoad(): void {
    const counts = this.changedCounts();
    if (counts === undefined) return;
    if (this.transport.send({ rg: "sib", t: "load", counts: counts.record })) {
      this.sent = counts.map;
      this.stalled = false;
    } else this.noteUnsent();
  }

  /** A message not sent: on an open channel, dropped for its backlog (counted, logged once). */
  private noteUnsent(): void {
    if (!this.transport.connected) return;
    this.droppedMessages?.inc({ where: "sent" });
    if (this.stalled) return;
    this.stalled = true;
    this.logger.warn(
      "radixgate-cluster: the channel to the primary is backlogged; decisions are dropped until it drains (they are hints: the hit rate drops, routing stays correct)",
    );
  }

  /** This process's in-flight counts when they differ from what was last sent; else undefined. */
  private changedCounts():
    | { record: Record<string, number>; map: Map<string, number> }
    | undefined {
    const registry = this.registry;
    if (registry === undefined || this.stopped) return undefined;
    let changed = false;
    let live = 0;
    for (const worker of registry.list()) {
      const n = worker.ownInFlight;
      if (n > 0) live += 1;
      if ((this.sent.get(worker.id) ?? 0) !== n) changed = true;
    }
    if (!changed && live === this.sent.size) return undefined;
    const record: Record<string, number> = {};
    const map = new Map<string, number>();
    for (const worker of registry.list()) {
      if (worker.ownInFlight > 0) {
        record[worker.id] = worker.ownInFlight;
        map.set(worker.id, worker.ownInFlight);
      }
    }
    return { record, map };
  }

  private receive(raw: unknown): void {
    const message: SiblingMessage | undefined = readSiblingMessage(raw);
    if (message === undefined) return;
    // A sibling's new worker is being added: its decisions (and the replay's end) wait for it.
    if ((message.t === "ops" || message.t === "ready") && this.awaitedWorkers.size > 0) {
      this.held.push(message);
      if (this.held.length > MAX_HELD_BATCHES) this.held.shift();
      return;
    }
    this.handle(message);
  }

  private handle(message: SiblingMessage): void {
    switch (message.t) {
      case "member":
        this.memberChanged(message.change);
        break;
      case "ops":
        for (const op of message.ops) this.apply(op);
        if (message.counts !== undefined && message.from !== undefined) {
          this.siblingCounts.set(message.from, message.counts);
          this.applyCounts();
        }
        break;
      case "load":
        if (message.from === undefined) break;
        this.siblingCounts.set(message.from, message.counts);
        this.applyCounts();
        break;
      case "gone":
        if (this.siblingCounts.delete(message.from)) this.applyCounts();
        break;
      case "missed":
        this.droppedMessages?.inc({ where: "relayed" }, message.n);
        this.logger.warn(
          { dropped: message.n },
          "radixgate-cluster: this process did not read its channel for a while; the primary dropped its siblings' decisions meanwhile",
        );
        break;
      case "claimed":
        this.siblingClaims.answered(message.n, message.value);
        break;
      case "ready":
        this.readyResolve?.();
        break;
      default:
        break;
    }
  }

  /** A sibling's membership change: applied, its decisions held until its worker is added. */
  private memberChanged(raw: SiblingMemberChange): void {
    const membership = this.membership;
    if (membership === undefined) return;
    const change = memberChange(raw);
    if (change === undefined) {
      this.logger.warn({ url: raw.url }, "a sibling's worker has an invalid role; not added");
      return;
    }
    if (change.kind === "add" && this.registry?.get(change.url) === undefined) {
      this.awaitedWorkers.add(change.url);
    }
    membership
      .apply(change)
      .catch((err: unknown) =>
        this.logger.warn({ err, url: change.url }, "a sibling's membership change failed here"),
      )
      .finally(() => {
        // Refused or failed: nothing waits for it any longer.
        if (this.awaitedWorkers.delete(change.url)) this.applyHeld();
      });
  }

  /** The held batches, in order, once no sibling's worker is awaited. */
  private applyHeld(): void {
    if (this.awaitedWorkers.size > 0) return;
    const held = this.held;
    this.held = [];
    for (const message of held) this.handle(message);
  }

  /** A sibling's decision, applied to this process's own index for a worker it has. */
  private apply(op: StateOp): void {
    const inner = this.inner;
    const registry = this.registry;
    if (inner === undefined || registry === undefined) return;
    if (op.kind !== "insert" && op.kind !== "truncate") return;
    if (registry.get(op.worker) === undefined) return;
    try {
      if (op.kind === "insert") inner.insert(op.worker, op.model, op.text);
      else inner.truncate(op.worker, op.model, op.text, op.keep);
    } catch (err) {
      this.logger.warn({ err }, "a sibling's decision could not be applied; skipped");
    }
  }

  /** Every worker's sibling count: the sum of what each sibling last said. */
  private applyCounts(): void {
    const registry = this.registry;
    const peers = this.peers;
    if (registry === undefined || peers === undefined) return;
    for (const worker of registry.list()) {
      let sum = 0;
      for (const counts of this.siblingCounts.values()) sum += counts[worker.id] ?? 0;
      peers.set("siblings", worker, sum);
    }
  }
}

/** A change of the worker set as the channel carries it (an add's fields as POST /workers names them). */
function siblingChange(change: MemberChange): SiblingMemberChange {
  if (change.kind === "remove") return change;
  const fields: Record<string, string | number | null> = { url: change.url };
  if (change.apiKey !== undefined) fields.api_key = change.apiKey;
  if (change.role !== undefined && change.role.type !== "regular") {
    fields.worker_type = change.role.type;
    fields.bootstrap_port = change.role.bootstrapPort;
  }
  return { kind: "add", url: change.url, fields };
}

/** The change a sibling sent; undefined when its role is not one. */
function memberChange(change: SiblingMemberChange): MemberChange | undefined {
  if (change.kind === "remove") return change;
  const { api_key: apiKey, worker_type: type, bootstrap_port: port } = change.fields;
  const role = type === undefined && port === undefined ? undefined : roleFrom(type, port);
  if (typeof role === "string") return undefined;
  return {
    kind: "add",
    url: change.url,
    ...(typeof apiKey === "string" && apiKey !== "" ? { apiKey } : {}),
    ...(role !== undefined && role.type !== "regular" ? { role } : {}),
  };
}
