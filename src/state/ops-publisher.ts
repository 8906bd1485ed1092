import { BoundedQueue } from "./bounded-queue.js";
import type { RedisLink } from "./redis-link.js";
import type { StateKeys } from "./state-keys.js";
import { encodeOp, type StateOp } from "./state-op.js";
import type { StateSecret } from "./state-secret.js";
import { encodeWorkerEntry } from "./worker-entry.js";

export interface OpsPublisherOptions {
  replicaId: string;
  keys: StateKeys;
  /** --state-secret: every op and workers-hash value is signed with it. */
  secret: StateSecret;
  /** --state-queue-size: ops waiting while Redis is slow or down; the oldest are dropped past it. */
  queueSize: number;
  /** --state-stream-length: the stream is trimmed to about this many entries. */
  streamLength: number;
  /** Told how many ops were published, dropped (queue full) or failed (sent again later). */
  onPublished?: (ops: number, bytes: number) => void;
  onDropped?: (ops: number) => void;
  /**
   * The stream takes no new entry: its top ID is the largest there is (someone wrote one there),
   * so XADD fails. The publisher deletes the stream (readers start it over) and sends again.
   */
  onStreamStuck?: () => void;
}

/** Redis's answer to an XADD on a stream whose top entry has the largest possible ID. */
const STREAM_STUCK =
  /exhausted the last possible ID|equal or smaller than the target stream top item/i;
/** At most one deletion of a stuck stream per this many ms (someone may keep writing the ID). */
const UNSTICK_EVERY_MS = 1000;

/** Ops per pipeline: one round trip each, small enough not to hold the event loop. */
const BATCH = 256;
/** Membership ops that may wait (workers are few; this only bounds a pathological admin loop). */
const CONTROL_QUEUE_SIZE = 1024;

/**
 * Publishes index and membership operations to the ops stream. The request path only pushes onto
 * a bounded queue (O(1), no await); batches leave in one pipeline each, one at a time, so a slow
 * Redis makes the queue fill and drop its oldest ops instead of piling up commands or memory.
 * Membership ops also update the workers hash, the set a starting replica loads.
 */
export class OpsPublisher {
  private readonly queue: BoundedQueue<StateOp>;
  /**
   * Membership ops wait apart and leave first: a flood of decisions while Redis is away must not
   * push out the rare add or remove of a worker.
   */
  private readonly control = new BoundedQueue<StateOp>(CONTROL_QUEUE_SIZE);
  /**
   * The batch's send, at the end of the turn of the event loop that queued its first op (as the
   * cluster's channel sends): a burst decided in one turn still goes out in one round trip. A
   * 2 ms linger, longer when timers ran late under load, widened the window in which a peer
   * deciding on the same worker has not heard of this decision nor of what it evicts.
   */
  private timer: NodeJS.Immediate | undefined;
  private sending: Promise<void> | undefined;
  private stopped = false;
  private lastUnstick = 0;

  constructor(
    private readonly link: RedisLink,
    private readonly options: OpsPublisherOptions,
  ) {
    this.queue = new BoundedQueue(options.queueSize);
    link.onChange((up) => {
      if (up) this.schedule();
    });
  }

  get pending(): number {
    return this.queue.size + this.control.size;
  }

  /** Queues an op; never blocks and never throws. */
  publish(op: StateOp): void {
    if (this.stopped) return;
    const queue = op.kind === "add" || op.kind === "remove" ? this.control : this.queue;
    if (!queue.push(op)) this.options.onDropped?.(1);
    this.schedule();
  }

  private schedule(): void {
    if (this.timer !== undefined || this.sending !== undefined || this.stopped) return;
    if (this.pending === 0 || !this.link.up) return;
    this.timer = setImmediate(() => {
      this.timer = undefined;
      this.sending = this.sendBatch().finally(() => {
        this.sending = undefined;
        this.schedule();
      });
    });
    this.timer.unref();
  }

  private async sendBatch(): Promise<void> {
    if (!this.link.up) return;
    const control = this.control.take(BATCH);
    const decisions = this.queue.take(BATCH - control.length);
    const ops = control.length === 0 ? decisions : [...control, ...decisions];
    if (ops.length === 0) return;
    const { keys, replicaId, streamLength, secret } = this.options;
    const codec = { secret, scope: keys.ops };
    const pipeline = this.link.commands.pipeline();
    let bytes = 0;
    for (const op of ops) {
      const fields = encodeOp(replicaId, op, codec);
      for (const f of fields) bytes += f.length;
      pipeline.xadd(keys.ops, "MAXLEN", "~", streamLength, "*", ...fields);
      if (op.kind === "add") {
        pipeline.hset(
          keys.workers,
          op.url,
          encodeWorkerEntry(op.url, op.apiKey, secret, keys.workers, Date.now(), op.role),
        );
      } else if (op.kind === "remove") {
        pipeline.hdel(keys.workers, op.url);
      }
    }
    try {
      const results = await pipeline.exec();
      if (results?.some(([err]) => err !== null && STREAM_STUCK.test(err.message)) === true)
        await this.unstick();
      if (results === null || results.some(([err]) => err !== null)) throw new Error("pipeline");
      this.options.onPublished?.(ops.length, bytes);
    } catch {
      // Not sent (or not known to be): keep them for the next attempt, as room allows. An op
      // that did reach Redis is then applied twice by peers, which inserts nothing new.
      const before = this.queue.dropped + this.control.dropped;
      this.control.requeueFront(control);
      this.queue.requeueFront(decisions);
      const dropped = this.queue.dropped + this.control.dropped - before;
      if (dropped > 0) this.options.onDropped?.(dropped);
    }
  }

  /** Deletes the stuck stream (at most once a second); the batch is sent again after it. */
  private async unstick(): Promise<void> {
    if (Date.now() - this.lastUnstick < UNSTICK_EVERY_MS) return;
    this.lastUnstick = Date.now();
    this.options.onStreamStuck?.();
    await this.link.commands.del(this.options.keys.ops).catch(() => {});
  }

  /** Sends whatever is queued now (membership resync, tests); resolves when done or Redis is down. */
  async flush(): Promise<void> {
    if (this.sending !== undefined) await this.sending;
    clearImmediate(this.timer);
    this.timer = undefined;
    while (this.pending > 0 && this.link.up && !this.stopped) {
      const before = this.pending;
      this.sending = this.sendBatch();
      await this.sending;
      this.sending = undefined;
      if (this.pending >= before) break;
    }
    this.schedule();
  }

  stop(): void {
    this.stopped = true;
    clearImmediate(this.timer);
    this.timer = undefined;
  }
}
