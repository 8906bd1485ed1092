import { Counter } from "prom-client";
import type { Logger } from "../logger.js";
import { roleFrom } from "../workers/worker-role.js";
import { BoundedQueue } from "./bounded-queue.js";
import type { SiblingChannel } from "./cluster-channel.js";
import {
  MAX_OPS_PER_MESSAGE,
  readSiblingMessage,
  SIBLING_MAX_TEXT_CHARS,
  type SiblingMemberChange,
  type SiblingMessage,
  type SiblingPending,
} from "./cluster-messages.js";
import type { PendingLoad } from "./peer-pending.js";
import { type ClaimReply, ReplicaClaims } from "./prefix-claims.js";
import type { MemberChange } from "./replicated-membership.js";
import type { ReplicaSide, Transport } from "./replication.js";
import type { StateOp } from "./state-op.js";

export interface ClusterTransportOptions {
  /** How long a new prefix's claim waits for the primary (then this process's choice stands). */
  claimTimeoutMs: number;
  /** How long a claim lives in the primary (long enough for the decision to reach every sibling). */
  claimTtlMs: number;
  /** Decisions waiting to leave while the channel is busy; past it the oldest are dropped. */
  queueSize: number;
  /** This process's seat among its siblings (SiblingLink.rank); default 0. */
  rank?: number;
}

/**
 * How often the own in-flight counts are compared with what was last sent, to send them when they
 * changed without a decision (a request ending); a decision's message carries them anyway. Each
 * message costs tens of µs of CPU at each end (bench:cluster), so not every millisecond.
 */
const LOAD_CHECK_MS = 20;
/**
 * How long a sibling's decision counts as queued prefill without a load message of it covering
 * it (one comes within LOAD_CHECK_MS of any change; this covers a decision that took no lease).
 */
const PENDING_TTL_MS = 500;
/** How long start() waits for the primary's replay. */
const START_WAIT_MS = 3000;

/**
 * radixgate-cluster's local channel (node:cluster IPC; the primary relays, state/cluster-hub.ts),
 * on one host, without Redis: a process's decisions leave together at the end of the turn, a
 * millisecond later at every sibling; its in-flight counts whenever they change (checked every
 * few ms); a new prefix is claimed at the primary, the one place two processes' claims meet; and,
 * without --state-url, the worker set's changes. Messages are checked on arrival
 * (cluster-messages.ts) but not signed: the channel never leaves the host's process tree.
 */
export class ClusterTransport implements Transport {
  readonly source = "siblings";
  readonly maxTextChars = SIBLING_MAX_TEXT_CHARS;
  readonly claims: ReplicaClaims;
  private side: ReplicaSide | undefined;
  private readonly queue: BoundedQueue<StateOp>;
  private readonly ownRank: number;
  private flushing: NodeJS.Immediate | undefined;
  private loadTimer: NodeJS.Timeout | undefined;
  /** Own counts as last sent (worker id → count > 0), and own queued prefill (→ characters > 0). */
  private sent = new Map<string, number>();
  private sentPending = new Map<string, number>();
  /** Each sibling's last counts, by its process id. */
  private readonly siblingCounts = new Map<number, Record<string, number>>();
  private readyResolve: (() => void) | undefined;
  private readonly ready = new Promise<void>((resolve) => {
    this.readyResolve = resolve;
  });
  private stopped = false;
  /** start() is over: this process's membership changes go to the siblings from now on. */
  private replayed = false;
  /** Claims sent to the primary, by number, waiting for its answer. */
  private nextClaim = 0;
  private readonly claimsWaiting = new Map<number, (reply: ClaimReply) => void>();
  /** Ops dropped because the queue was full (tests, logs). */
  dropped = 0;
  /** Messages dropped on a full channel: this process's own, and the primary's to it. */
  private droppedMessages: Counter<"where"> | undefined;
  /** Logged once per stall of the channel. */
  private stalled = false;

  constructor(
    private readonly channel: SiblingChannel,
    options: ClusterTransportOptions,
    private readonly logger: Logger,
  ) {
    this.queue = new BoundedQueue(options.queueSize);
    this.ownRank = options.rank ?? 0;
    this.claims = new ReplicaClaims(
      {
        up: () => !this.stopped && this.channel.connected,
        ask: (key, value, ttlMs, abandoned) => this.askClaim(key, value, ttlMs, abandoned),
      },
      { timeoutMs: options.claimTimeoutMs, ttlMs: options.claimTtlMs },
    );
    channel.onMessage((raw) => this.receive(raw));
    channel.onClose(() => {
      for (const answer of this.claimsWaiting.values()) answer("error");
      this.readyResolve?.();
    });
  }

  /** One claim at the primary: its answer by number (a late one, after the timeout, is dropped). */
  private askClaim(
    key: string,
    value: string,
    ttlMs: number,
    abandoned: AbortSignal,
  ): Promise<ClaimReply> {
    const n = this.nextClaim;
    this.nextClaim = (this.nextClaim + 1) % Number.MAX_SAFE_INTEGER;
    return new Promise<ClaimReply>((resolve) => {
      this.claimsWaiting.set(n, resolve);
      abandoned.addEventListener("abort", () => resolve("error"), { once: true });
      this.channel.send({ rg: "sib", t: "claim", n, key, value, ttlMs });
    }).then((reply) => {
      this.claimsWaiting.delete(n);
      return typeof reply === "string"
        ? reply
        : { holder: reply.holder, won: reply.holder === value };
    });
  }

  attach(side: ReplicaSide): void {
    this.side = side;
    if (side.metricsRegistry !== undefined)
      this.droppedMessages = new Counter({
        name: "radixgate_cluster_dropped_total",
        help: "radixgate-cluster: decision batches and load messages dropped because the local channel's backlog was full (where: sent by this process, or relayed to it by the primary while it did not read).",
        labelNames: ["where"],
        registers: [side.metricsRegistry],
      });
  }

  workerAdded(): void {
    this.applyCounts();
  }

  /** One of this process's ops: a decision (queued for the turn's end) or a membership change. */
  /** This process's seat among its siblings, as the primary gave it (SiblingLink.rank). */
  rank(): number {
    return this.ownRank;
  }

  publish(op: StateOp): void {
    if (op.kind === "add" || op.kind === "remove") this.sendMembership(siblingChange(op));
    else this.queueDecision(op);
  }

  /**
   * One of this process's membership changes, for the siblings (never dropped). Not before the
   * replay is over: the workers a process starts with (--worker-urls) are its own starting point,
   * not a change, and a replayed removal must win over them, as it does after a restart.
   */
  private sendMembership(change: SiblingMemberChange): void {
    if (this.stopped || !this.replayed) return;
    if (!this.channel.send({ rg: "sib", t: "member", change })) {
      this.logger.warn(
        { url: change.url, change: change.kind },
        "radixgate-cluster: the channel to the primary is closed; the other processes did not get this membership change",
      );
    }
  }

  /** Asks the primary for the recent decisions and waits (bounded) until they are applied. */
  async start(): Promise<void> {
    if (!this.channel.send({ rg: "sib", t: "hello" })) return;
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
    if (this.sent.size > 0 || this.sentPending.size > 0)
      this.channel.send({ rg: "sib", t: "load", counts: {} });
    this.sent.clear();
    this.sentPending.clear();
    for (const answer of this.claimsWaiting.values()) answer("error");
  }

  private queueDecision(op: StateOp): void {
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
      const sent = this.channel.send({
        rg: "sib",
        t: "ops",
        ops,
        ...(counts !== undefined ? { counts: counts.record, pending: counts.pending } : {}),
      });
      if (!sent) {
        this.noteUnsent();
        return;
      }
      this.stalled = false;
      if (counts !== undefined) this.markSent(counts);
    }
  }

  private markSent(counts: OwnLoad): void {
    this.sent = counts.map;
    this.sentPending = counts.pendingMap;
  }

  /** Sends this process's in-flight counts when they changed since last sent (the timer's work). */
  private sendLoad(): void {
    this.side?.pending.expire();
    const counts = this.changedCounts();
    if (counts === undefined) return;
    if (
      this.channel.send({ rg: "sib", t: "load", counts: counts.record, pending: counts.pending })
    ) {
      this.markSent(counts);
      this.stalled = false;
    } else this.noteUnsent();
  }

  /** A message not sent: on an open channel, dropped for its backlog (counted, logged once). */
  private noteUnsent(): void {
    if (!this.channel.connected) return;
    this.droppedMessages?.inc({ where: "sent" });
    if (this.stalled) return;
    this.stalled = true;
    this.logger.warn(
      "radixgate-cluster: the channel to the primary is backlogged; decisions are dropped until it drains (they are hints: the hit rate drops, routing stays correct)",
    );
  }

  /**
   * This process's in-flight counts and queued prefill when they differ from what was last sent;
   * else undefined.
   */
  private changedCounts(): OwnLoad | undefined {
    const side = this.side;
    if (side === undefined || this.stopped) return undefined;
    const workers = side.loadWorkers();
    let changed = false;
    let live = 0;
    let livePending = 0;
    for (const worker of workers) {
      const n = worker.ownInFlight;
      const chars = worker.ownPendingChars ?? 0;
      if (n > 0) live += 1;
      if (chars > 0) livePending += 1;
      if ((this.sent.get(worker.id) ?? 0) !== n) changed = true;
      if ((this.sentPending.get(worker.id) ?? 0) !== chars) changed = true;
    }
    if (!changed && live === this.sent.size && livePending === this.sentPending.size)
      return undefined;
    const record: Record<string, number> = {};
    const map = new Map<string, number>();
    const pending: Record<string, [number, number]> = {};
    const pendingMap = new Map<string, number>();
    for (const worker of workers) {
      if (worker.ownInFlight > 0) {
        record[worker.id] = worker.ownInFlight;
        map.set(worker.id, worker.ownInFlight);
      }
      const chars = worker.ownPendingChars ?? 0;
      if (chars > 0) {
        pending[worker.id] = [chars, worker.ownPendingRequests ?? 1];
        pendingMap.set(worker.id, chars);
      }
    }
    return { record, map, pending, pendingMap };
  }

  private receive(raw: unknown): void {
    const message: SiblingMessage | undefined = readSiblingMessage(raw);
    const side = this.side;
    if (message === undefined || side === undefined) return;
    switch (message.t) {
      case "member": {
        const change = memberChange(message.change);
        if (change === undefined)
          this.logger.warn(
            { url: message.change.url },
            "a sibling's worker has an invalid role; not added",
          );
        else side.receive(change);
        break;
      }
      case "ops": {
        const from = message.from;
        const origin =
          from === undefined ? undefined : { peer: sibling(from), ttlMs: PENDING_TTL_MS };
        for (const op of message.ops) side.receive(op, origin);
        if (message.counts !== undefined && from !== undefined) {
          this.siblingCounts.set(from, message.counts);
          this.applyCounts();
          this.reported(from, message.pending);
        }
        break;
      }
      case "load":
        if (message.from === undefined) break;
        this.siblingCounts.set(message.from, message.counts);
        this.applyCounts();
        this.reported(message.from, message.pending);
        break;
      case "gone":
        if (this.siblingCounts.delete(message.from)) this.applyCounts();
        side.pending.gone(sibling(message.from));
        break;
      case "missed":
        this.droppedMessages?.inc({ where: "relayed" }, message.n);
        this.logger.warn(
          { dropped: message.n },
          "radixgate-cluster: this process did not read its channel for a while; the primary dropped its siblings' decisions meanwhile",
        );
        break;
      case "claimed":
        this.claimsWaiting.get(message.n)?.({ holder: message.value, won: false });
        break;
      case "ready":
        // The replay is over once the workers it added are in the registry too.
        void side.settled().then(() => this.readyResolve?.());
        break;
      default:
        break;
    }
  }

  /**
   * A sibling's queued prefill: the channel keeps order, so it covers every decision of that
   * sibling received before it.
   */
  private reported(from: number, pending: SiblingPending | undefined): void {
    const load = new Map<string, PendingLoad>();
    for (const [id, [chars, requests]] of Object.entries(pending ?? {}))
      load.set(id, { chars, requests });
    this.side?.pending.reported(sibling(from), PENDING_TTL_MS, load);
  }

  /** Every worker's sibling count: the sum of what each sibling last said. */
  private applyCounts(): void {
    const side = this.side;
    if (side === undefined) return;
    for (const worker of side.loadWorkers()) {
      let sum = 0;
      for (const counts of this.siblingCounts.values()) sum += counts[worker.id] ?? 0;
      worker.setPeerInFlight(sum);
    }
  }
}

/** This process's load as sent: in-flight counts and queued prefill, as records and as maps. */
interface OwnLoad {
  readonly record: Record<string, number>;
  readonly map: Map<string, number>;
  readonly pending: Record<string, [number, number]>;
  readonly pendingMap: Map<string, number>;
}

/** A sibling process's name among every transport's peers (peer-pending.ts). */
function sibling(id: number): string {
  return `sib:${id}`;
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
