/**
 * One worker's KV-event stream: a ZMQ SUB socket on the engine's publisher, sequence tracking,
 * and replay over a DEALER socket on the engine's replay (ROUTER) endpoint. Wire format: see
 * decode.ts (vLLM vllm/distributed/kv_events.py ZmqEventPublisher, SGLang the same).
 *
 * - In order: each batch is handed to `onBatch`, one at a time, in sequence order.
 * - Gap (a lost message, a reconnect): the missed range is asked from the replay endpoint. When
 *   replay is unavailable or incomplete, the worker's precise state is dropped (`onReset`) and the
 *   stream counts as "rebuilding" for `rebuildMs`: the router routes that worker on its
 *   approximate tree meanwhile.
 * - Sequence going backwards (the engine restarted): `onReset`, then the new stream is replayed
 *   from the start of the engine's buffer, so batches it published before this one are not lost.
 * - On every (re)connection the subscriber asks for a replay from the last batch it applied, so an
 *   idle engine is synchronised without waiting for its next event. That batch must come back
 *   first and byte for byte: when it is missing or different, the engine restarted while the
 *   router was away (its new numbers may overlap the old ones), so the worker is reset and the
 *   new stream is replayed from its start. ZMQ reconnects by itself, with exponential backoff
 *   between `reconnectMinMs` and `reconnectMaxMs`.
 * - A malformed message is counted and skipped, never fatal.
 */
import { Dealer, Subscriber } from "zeromq";
import {
  decodeBatch,
  decodeEnvelope,
  decodeSequence,
  END_OF_REPLAY,
  KvDecodeError,
} from "./decode.js";
import { encodeSequence } from "./encode.js";
import type { EventBatch } from "./events.js";

export interface KvSubscriberOptions {
  endpoint: string;
  /** Undefined: the engine was started without a replay endpoint. */
  replayEndpoint: string | undefined;
  replayTimeoutMs: number;
  /** How long a worker whose history is incomplete routes on its approximate tree. */
  rebuildMs: number;
  reconnectMinMs: number;
  reconnectMaxMs: number;
  /** Largest message accepted, bytes (ZMQ drops the connection on a bigger one). */
  maxMessageBytes: number;
  now?: () => number;
  onBatch(batch: EventBatch): void;
  /** Forget the worker's precise state: a restart, or a gap replay could not fill. */
  onReset(reason: "sequence_reset" | "gap"): void;
  onMalformed(error: KvDecodeError): void;
  onReplay(outcome: "complete" | "incomplete" | "unavailable" | "failed"): void;
}

/** Most batches one replay may bring (vLLM keeps 10 000 by default). */
const MAX_REPLAY_BATCHES = 20_000;

export class KvEventSubscriber {
  private readonly sub: Subscriber;
  private readonly now: () => number;
  /** Sequence of the next batch expected; undefined until the first synchronisation. */
  private expected: bigint | undefined;
  /** Payloads applied from the last replay, so the same batch arriving on SUB is skipped once. */
  private replayed = new Map<bigint, Uint8Array>();
  /** The last batch applied: a reconnection checks that the engine still has it (no restart). */
  private lastApplied: { sequence: bigint; payload: Uint8Array } | undefined;
  private connected = false;
  private rebuildingUntil = 0;
  private synced = false;
  /** Serialises message handling and replays: one at a time, in arrival order. */
  private queue: Promise<void> = Promise.resolve();
  private closed = false;

  constructor(private readonly options: KvSubscriberOptions) {
    this.now = options.now ?? Date.now;
    this.sub = new Subscriber({
      linger: 0,
      reconnectInterval: options.reconnectMinMs,
      reconnectMaxInterval: options.reconnectMaxMs,
      maxMessageSize: options.maxMessageBytes,
      receiveHighWaterMark: 100_000,
    });
  }

  /** Events can be trusted: connected, synchronised, and not rebuilding after a loss. */
  get live(): boolean {
    return this.connected && this.synced && this.now() >= this.rebuildingUntil;
  }

  get state(): "live" | "rebuilding" | "disconnected" | "syncing" {
    if (!this.connected) return "disconnected";
    if (!this.synced) return "syncing";
    return this.now() >= this.rebuildingUntil ? "live" : "rebuilding";
  }

  start(): void {
    this.sub.subscribe();
    void this.watchEvents();
    this.sub.connect(this.options.endpoint);
    void this.receiveLoop();
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.connected = false;
    this.sub.close();
  }

  private async watchEvents(): Promise<void> {
    try {
      for await (const event of this.sub.events) {
        if (event.type === "connect") {
          this.connected = true;
          this.synced = false;
          this.enqueue(() => this.sync());
        } else if (event.type === "disconnect") {
          this.connected = false;
        }
      }
    } catch {
      // The socket closed.
    }
  }

  private async receiveLoop(): Promise<void> {
    try {
      for await (const frames of this.sub) {
        await this.enqueue(() => this.handle(frames));
      }
    } catch {
      // The socket closed.
    }
  }

  private enqueue(task: () => Promise<void> | void): Promise<void> {
    this.queue = this.queue.then(task).catch(() => {});
    return this.queue;
  }

  /** After a (re)connection: fetch whatever was missed, or everything the engine still has. */
  private async sync(): Promise<void> {
    if (this.closed) return;
    const last = this.lastApplied;
    if (last === undefined || this.options.replayEndpoint === undefined) {
      await this.catchUp(this.expected ?? 0n, undefined);
    } else {
      await this.resume(last);
    }
    this.synced = true;
  }

  /**
   * Replays from the last batch applied, which must come back unchanged: a restarted engine
   * numbers from 0 again, so that number is either not there yet or holds another batch.
   */
  private async resume(last: { sequence: bigint; payload: Uint8Array }): Promise<void> {
    const batches = await this.replay(last.sequence);
    const first = batches?.[0];
    if (batches === undefined) {
      this.options.onReplay("unavailable");
      this.lost(true);
      return;
    }
    if (
      first === undefined ||
      first.sequence !== last.sequence ||
      Buffer.compare(first.payload, last.payload) !== 0
    ) {
      this.restarted();
      await this.catchUp(0n, undefined);
      return;
    }
    const from = this.expected ?? last.sequence + 1n;
    this.catchUpFrom(from, undefined, batches, true);
  }

  /** The engine restarted: forget its old stream; the new one is read from its start. */
  private restarted(): void {
    this.options.onReset("sequence_reset");
    this.expected = undefined;
    this.lastApplied = undefined;
    this.replayed.clear();
  }

  private async handle(frames: Buffer[]): Promise<void> {
    if (this.closed) return;
    let sequence: bigint;
    let payload: Buffer;
    try {
      ({ sequence, payload } = decodeEnvelope(frames));
    } catch (error) {
      this.options.onMalformed(error as KvDecodeError);
      return;
    }
    if (this.expected !== undefined && sequence < this.expected) {
      const seen = this.replayed.get(sequence);
      if (seen !== undefined && payload.equals(seen)) return; // already applied
      // The sequence went backwards: the engine restarted with an empty cache. What it published
      // before this batch is asked from the start of its buffer (below).
      this.restarted();
    }
    // Nothing before sequence 0; otherwise what came before this batch is asked for.
    if (this.expected === undefined ? sequence > 0n : sequence > this.expected) {
      await this.catchUp(this.expected ?? 0n, sequence);
    }
    this.replayed.clear();
    this.apply(sequence, payload);
    this.synced = true;
  }

  /**
   * Replays [from, to) (to undefined: everything buffered). A range that cannot be filled means
   * lost events: the precise state is dropped (when there was one) and the worker rebuilds.
   */
  private async catchUp(from: bigint, to: bigint | undefined): Promise<void> {
    const hadState = this.expected !== undefined;
    const batches = await this.replay(from);
    this.catchUpFrom(from, to, batches, hadState);
  }

  private catchUpFrom(
    from: bigint,
    to: bigint | undefined,
    batches: { sequence: bigint; payload: Uint8Array }[] | undefined,
    hadState: boolean,
  ): void {
    if (batches === undefined) {
      // A first message with the very sequence expected missed nothing.
      if (to !== undefined && to === from) return;
      this.options.onReplay("unavailable");
      this.lost(hadState);
      if (to !== undefined) this.expected = to;
      return;
    }
    const usable = batches.filter(
      (b) => b.sequence >= from && (to === undefined || b.sequence < to),
    );
    const contiguous = usable.every((b, i) => b.sequence === from + BigInt(i));
    const complete = contiguous && (to === undefined || from + BigInt(usable.length) === to);
    this.options.onReplay(complete ? "complete" : "incomplete");
    // Reset before applying: what the replay still has is worth keeping.
    if (!complete) this.lost(hadState);
    for (const { sequence, payload } of usable) {
      this.apply(sequence, payload);
      this.replayed.set(sequence, payload);
    }
    this.expected = to ?? (usable.length > 0 ? usable.at(-1)!.sequence + 1n : from);
  }

  /** Events were lost: drop what the worker's state was built on, and rebuild for a while. */
  private lost(hadState: boolean): void {
    if (hadState) this.options.onReset("gap");
    this.startRebuild();
  }

  private startRebuild(): void {
    this.rebuildingUntil = this.now() + this.options.rebuildMs;
  }

  private apply(sequence: bigint, payload: Uint8Array): void {
    this.expected = sequence + 1n;
    this.lastApplied = { sequence, payload };
    let batch: EventBatch;
    try {
      batch = decodeBatch(payload);
    } catch (error) {
      this.options.onMalformed(error as KvDecodeError);
      return;
    }
    this.options.onBatch(batch);
  }

  /** Batches from `from` on, from the replay endpoint; undefined when it does not answer. */
  private async replay(
    from: bigint,
  ): Promise<{ sequence: bigint; payload: Uint8Array }[] | undefined> {
    const endpoint = this.options.replayEndpoint;
    if (endpoint === undefined) return undefined;
    const timeout = this.options.replayTimeoutMs;
    const dealer = new Dealer({ linger: 0, receiveTimeout: timeout, sendTimeout: timeout });
    const deadline = this.now() + timeout;
    try {
      dealer.connect(endpoint);
      await dealer.send(["", encodeSequence(from)]);
      const out: { sequence: bigint; payload: Uint8Array }[] = [];
      while (out.length <= MAX_REPLAY_BATCHES && this.now() < deadline) {
        const frames = await dealer.receive();
        // [empty delimiter, sequence, payload]
        if (frames.length !== 3) throw new KvDecodeError("replay answer is not 3 frames");
        const sequence = decodeSequence(frames[1]!);
        if (sequence === END_OF_REPLAY) return out;
        out.push({ sequence, payload: frames[2]! });
      }
      this.options.onReplay("failed");
      return undefined;
    } catch (error) {
      if (error instanceof KvDecodeError) this.options.onMalformed(error);
      return undefined;
    } finally {
      dealer.close();
    }
  }
}
