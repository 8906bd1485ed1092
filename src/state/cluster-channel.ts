import cluster, { type Worker as ClusterWorker } from "node:cluster";
import type { SiblingHub } from "./cluster-hub.js";
import type { SiblingMessage } from "./cluster-messages.js";

/*
 * radixgate-cluster's local channel (node:cluster IPC), both ends: a process's
 * (clusterSiblingLink, what its ClusterTransport sends on) and the primary's for each process
 * (connectToHub), each with a bounded backlog (SiblingOutbox).
 */

/**
 * The environment variable radixgate-cluster sets for its processes when they share decisions
 * over the local channel: the cluster's id (the prefix of their Redis replica ids, so that with
 * --state-url they leave each other out of what they read from Redis).
 */
export const CLUSTER_GROUP_ENV = "RADIXGATE_CLUSTER_GROUP";

/**
 * The environment variable radixgate-cluster sets for each process: its seat, 0 to processes − 1
 * (a process started again after one exited takes the seat that freed), where its rotations of
 * equal candidates start (Transport.rank, scheduling/rotation.ts).
 */
export const CLUSTER_SEAT_ENV = "RADIXGATE_CLUSTER_SEAT";

/** The lowest seat none of `taken` holds. */
export function freeSeat(taken: Iterable<number>): number {
  const held = new Set(taken);
  let seat = 0;
  while (held.has(seat)) seat++;
  return seat;
}

/** A process's end of the local channel, as its ClusterTransport uses it (tests may give another). */
export interface SiblingChannel {
  /**
   * Sends a message; false when the channel is closed, or when a decision batch or load message
   * was dropped because the channel's backlog is full (state/cluster-channel.ts).
   */
  send(message: SiblingMessage): boolean;
  onMessage(listener: (raw: unknown) => void): void;
  onClose(listener: () => void): void;
  readonly connected: boolean;
}

/** What a router process of radixgate-cluster gets: its channel and its cluster's id. */
export interface SiblingLink {
  readonly transport: SiblingChannel;
  readonly group: string;
  /** The process's seat among its siblings (CLUSTER_SEAT_ENV); undefined when not given. */
  readonly rank?: number;
}

/**
 * The local channel of a process started by radixgate-cluster (node:cluster's IPC to the
 * primary, which relays to the siblings); undefined for a router started on its own, or by a
 * cluster told not to share (`--no-share`).
 */
export function clusterSiblingLink(env: NodeJS.ProcessEnv = process.env): SiblingLink | undefined {
  const group = env[CLUSTER_GROUP_ENV];
  if (!cluster.isWorker || group === undefined || !/^[0-9a-f]{4,32}$/.test(group)) return undefined;
  if (process.send === undefined) return undefined;
  // Bounded backlog towards the primary (a stalled primary must not grow this process's memory).
  const outbox = new SiblingOutbox((message, done) => {
    if (!process.connected || process.send === undefined) {
      done();
      return false;
    }
    try {
      process.send(message, undefined, undefined, done);
      return process.connected;
    } catch {
      done();
      return false; // the channel closed between the check and the send
    }
  });
  const transport: SiblingChannel = {
    send: (message) => outbox.send(message),
    onMessage(listener) {
      process.on("message", listener);
    },
    onClose(listener) {
      process.on("disconnect", listener);
    },
    get connected() {
      return process.connected;
    },
  };
  const seat = Number(env[CLUSTER_SEAT_ENV]);
  return Number.isInteger(seat) && seat >= 0 && seat < 4096
    ? { transport, group, rank: seat }
    : { transport, group };
}

/**
 * The primary's end of one process's channel: its messages go to the hub, and the hub's to it
 * through a bounded backlog (state/cluster-channel.ts); past it, decisions for a process that
 * stopped reading are dropped (`onStall`), and its siblings' counts sent again once it catches up.
 */
export function connectToHub(hub: SiblingHub, worker: ClusterWorker, onStall?: () => void): void {
  const id = worker.id;
  const outbox = new SiblingOutbox(
    (message, done) => {
      if (!worker.isConnected()) {
        done();
        return false;
      }
      return worker.send(message, undefined, done);
    },
    {
      ...(onStall !== undefined ? { onStall } : {}),
      onDrained: (dropped) => hub.caughtUp(id, dropped),
    },
  );
  hub.add(id, (message) => outbox.send(message));
  worker.on("message", (message) => hub.receive(id, message));
  worker.on("disconnect", () => hub.remove(id));
}

/**
 * Messages written to one end of radixgate-cluster's local channel and not yet taken by the
 * pipe, past which decision batches and load counts are dropped: Node buffers what `send` is
 * given without limit, so a process that stalls (or a primary that does) would otherwise make
 * its peer's memory grow with every decision. 1,024 batches of at most 256 decisions, a few MB
 * at worst; a healthy process takes them in well under a millisecond, so the bound is only
 * reached by a stalled one.
 */
export const SIBLING_OUTBOX_LIMIT = 1024;

/** Only hints are dropped: a lost decision costs hit rate, never correctness. */
const droppable = (message: SiblingMessage) => message.t === "ops" || message.t === "load";

export interface SiblingOutboxEvents {
  /** The first drop of a backlog (log once per stall). */
  onStall?: () => void;
  /** The backlog is written out after `dropped` messages were dropped: the peer may resync. */
  onDrained?: (dropped: number) => void;
}

/**
 * One end of the channel with a bound on its backlog. `write` sends a message and calls `done`
 * once the pipe took it (node:cluster's `send` callback, called on success and on a closed
 * channel alike). Membership, claims, replay and the rest are never dropped.
 */
export class SiblingOutbox {
  /** Messages given to `write` and not yet taken. */
  private pending = 0;
  /** Dropped since the backlog last drained. */
  private droppedNow = 0;
  /** Dropped since the outbox was made. */
  dropped = 0;

  constructor(
    private readonly write: (message: SiblingMessage, done: () => void) => boolean,
    private readonly events: SiblingOutboxEvents = {},
    private readonly limit = SIBLING_OUTBOX_LIMIT,
  ) {}

  /** Sends `message`; false when it was dropped (backlog full) or the channel is closed. */
  send(message: SiblingMessage): boolean {
    if (this.pending >= this.limit && droppable(message)) {
      this.dropped += 1;
      this.droppedNow += 1;
      if (this.droppedNow === 1) this.events.onStall?.();
      return false;
    }
    this.pending += 1;
    let done = false;
    const written = this.write(message, () => {
      if (done) return;
      done = true;
      this.pending -= 1;
      if (this.pending === 0 && this.droppedNow > 0) {
        const n = this.droppedNow;
        this.droppedNow = 0;
        this.events.onDrained?.(n);
      }
    });
    return written;
  }

  /** Messages waiting to be taken by the pipe. */
  get backlog(): number {
    return this.pending;
  }
}
