import cluster, { type Worker as ClusterWorker } from "node:cluster";
import type { SiblingHub } from "./sibling-hub.js";
import type { SiblingMessage } from "./sibling-messages.js";
import { SiblingOutbox } from "./sibling-outbox.js";

/**
 * The environment variable radixgate-cluster sets for its processes when they share decisions
 * over the local channel: the cluster's id (the prefix of their Redis replica ids, so that with
 * --state-url they leave each other out of what they read from Redis).
 */
export const CLUSTER_GROUP_ENV = "RADIXGATE_CLUSTER_GROUP";

/** A process's end of the local channel (tests may give another). */
export interface SiblingTransport {
  /**
   * Sends a message; false when the channel is closed, or when a decision batch or load message
   * was dropped because the channel's backlog is full (state/sibling-outbox.ts).
   */
  send(message: SiblingMessage): boolean;
  onMessage(listener: (raw: unknown) => void): void;
  onClose(listener: () => void): void;
  readonly connected: boolean;
}

/** What a router process of radixgate-cluster gets: its channel and its cluster's id. */
export interface SiblingLink {
  readonly transport: SiblingTransport;
  readonly group: string;
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
  const transport: SiblingTransport = {
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
  return { transport, group };
}

/**
 * The primary's end of one process's channel: its messages go to the hub, and the hub's to it
 * through a bounded backlog (state/sibling-outbox.ts); past it, decisions for a process that
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
