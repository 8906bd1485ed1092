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
 * - A malformed message is counted and skipped, never fatal. A batch over `maxMessageBytes` is
 *   refused undecoded and counted; its events are lost, so the worker rebuilds as after a gap.
 * - Bounded work per event-loop turn: the receive loop takes its share of a TurnBudget shared by
 *   every stream, so a flood of messages cannot hold the loop (issue 20).
 * - A publisher faster than the router can apply is shed, not queued (flood-guard.ts): its
 *   messages are read and dropped undecoded for a while, the worker's state is reset (`overload`)
 *   and it rebuilds once the hold ends. The manager sheds the same way when its own backlog of
 *   decoded batches is full (`rebuild`).
 */
import { Dealer, Subscriber } from "zeromq";
import {
  decodeBatchInSlices,
  decodeEnvelope,
  decodeSequence,
  END_OF_REPLAY,
  encodeSequence,
  KvDecodeError,
} from "./decode.js";
import type { EventBatch } from "./events.js";
import { FloodGuard } from "./flood-guard.js";
import type { TurnBudget } from "./turn-budget.js";

export interface KvSubscriberOptions {
  endpoint: string;
  /** Undefined: the engine was started without a replay endpoint. */
  replayEndpoint: string | undefined;
  replayTimeoutMs: number;
  /** How long a worker whose history is incomplete routes on its approximate tree. */
  rebuildMs: number;
  reconnectMinMs: number;
  reconnectMaxMs: number;
  /** Largest batch applied, bytes; a bigger one is refused (--kv-events-max-message-bytes). */
  maxMessageBytes: number;
  /** The event feed's share of each event-loop turn, shared by every stream. */
  budget?: TurnBudget | undefined;
  /** Resolves when the batches handed over are (nearly) applied: the next message is read then. */
  caughtUp?(): Promise<void> | undefined;
  now?: () => number;
  onBatch(batch: EventBatch): void;
  /**
   * Forget the worker's precise state: a restart, a gap replay could not fill, or a batch refused
   * for its size (`too_large`).
   */
  onReset(reason: ResetReason): void;
  /**
   * Batches not applied (before the reset they cause): one over maxMessageBytes (`too_large`), or
   * those dropped unread because the publisher is faster than the router (`overload`).
   */
  onRefused?(reason: "too_large" | "overload", batches: number, bytes: number): void;
  onMalformed(error: KvDecodeError): void;
  onReplay(outcome: "complete" | "incomplete" | "unavailable" | "failed"): void;
}

export type ResetReason = "sequence_reset" | "gap" | "too_large" | "overload";

/** Most batches one replay may bring (vLLM keeps 10 000 by default). */
const MAX_REPLAY_BATCHES = 20_000;
/** Most bytes one replay may bring, in batches of the largest size accepted. */
const MAX_REPLAY_MESSAGES_OF_MAX_SIZE = 16;
/** Messages ZMQ holds for the router before it drops (a few seconds of a busy engine's steps). */
const RECEIVE_HIGH_WATER_MARK = 1000;

/**
 * The size past which ZMQ drops the connection without reading the message: 64 MiB, or twice the
 * limit. Between the limit and this a batch is received, refused and counted.
 */
export function zmqMessageCeiling(maxMessageBytes: number): number {
  return Math.max(64 * 1024 * 1024, 2 * maxMessageBytes);
}

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
  private readonly flood: FloodGuard;

  constructor(private readonly options: KvSubscriberOptions) {
    this.now = options.now ?? Date.now;
    this.flood = new FloodGuard(this.now);
    this.sub = new Subscriber({
      linger: 0,
      reconnectInterval: options.reconnectMinMs,
      reconnectMaxInterval: options.reconnectMaxMs,
      maxMessageSize: zmqMessageCeiling(options.maxMessageBytes),
      receiveHighWaterMark: RECEIVE_HIGH_WATER_MARK,
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

  /**
   * The manager shed this stream's backlog (it publishes faster than the router applies) and
   * dropped its precise state: route the worker approximately while it rebuilds.
   */
  rebuild(): void {
    this.startRebuild();
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
        if (this.flood.holding) {
          // In the queue too: a replay under way (a reconnection) sees the sequence move in order.
          await this.enqueue(() => this.dropUnread(frames));
        } else {
          await this.enqueue(() => this.handle(frames));
          await this.options.caughtUp?.();
          if (this.flood.flooded(this.sub.readable)) await this.enqueue(() => this.shed());
        }
        await this.options.budget?.take();
      }
    } catch {
      // The socket closed.
    }
  }

  /**
   * The publisher floods: its messages are dropped unread for a while (flood-guard.ts), the state
   * built on the stream is reset, and the worker rebuilds from the end of the hold on.
   */
  private shed(): void {
    if (this.closed) return;
    const holdEnd = this.flood.hold();
    this.lost(true, "overload");
    this.rebuildingUntil = holdEnd + this.options.rebuildMs;
  }

  /** A message of a stream being shed: counted, its sequence kept so no replay asks for it. */
  private dropUnread(frames: Buffer[]): void {
    this.options.onRefused?.(
      "overload",
      1,
      frames.reduce((n, f) => n + f.length, 0),
    );
    try {
      this.expected = decodeEnvelope(frames).sequence + 1n;
    } catch {
      // Dropped all the same.
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
    await this.catchUpFrom(from, undefined, batches, true);
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
    await this.apply(sequence, payload);
    this.synced = true;
  }

  /**
   * Replays [from, to) (to undefined: everything buffered). A range that cannot be filled means
   * lost events: the precise state is dropped (when there was one) and the worker rebuilds.
   */
  private async catchUp(from: bigint, to: bigint | undefined): Promise<void> {
    const hadState = this.expected !== undefined;
    const batches = await this.replay(from);
    await this.catchUpFrom(from, to, batches, hadState);
  }

  private async catchUpFrom(
    from: bigint,
    to: bigint | undefined,
    batches: { sequence: bigint; payload: Uint8Array }[] | undefined,
    hadState: boolean,
  ): Promise<void> {
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
      await this.apply(sequence, payload);
      this.replayed.set(sequence, payload);
    }
    this.expected = to ?? (usable.length > 0 ? usable.at(-1)!.sequence + 1n : from);
  }

  /** Events were lost: drop what the worker's state was built on, and rebuild for a while. */
  private lost(hadState: boolean, reason: ResetReason = "gap"): void {
    if (hadState) this.options.onReset(reason);
    this.startRebuild();
  }

  /** Never shortens a rebuild under way (a shed's lasts to the end of its hold, see shed()). */
  private startRebuild(): void {
    this.rebuildingUntil = Math.max(this.rebuildingUntil, this.now() + this.options.rebuildMs);
  }

  private async apply(sequence: bigint, payload: Uint8Array): Promise<void> {
    this.expected = sequence + 1n;
    if (payload.length > this.options.maxMessageBytes) {
      // Never decoded: a 48 MB batch of 4M blocks took seconds to decode and 1 GB to hold.
      this.options.onRefused?.("too_large", 1, payload.length);
      this.lost(true, "too_large");
      return;
    }
    this.lastApplied = { sequence, payload };
    let batch: EventBatch;
    try {
      batch = await decodeBatchInSlices(payload);
    } catch (error) {
      this.options.onMalformed(error as KvDecodeError);
      return;
    }
    // A large batch is decoded over several turns; the stream may have closed meanwhile.
    if (this.closed) return;
    this.options.onBatch(batch);
  }

  /** Batches from `from` on, from the replay endpoint; undefined when it does not answer. */
  private async replay(
    from: bigint,
  ): Promise<{ sequence: bigint; payload: Uint8Array }[] | undefined> {
    const endpoint = this.options.replayEndpoint;
    if (endpoint === undefined) return undefined;
    const timeout = this.options.replayTimeoutMs;
    const dealer = new Dealer({
      linger: 0,
      receiveTimeout: timeout,
      sendTimeout: timeout,
      maxMessageSize: zmqMessageCeiling(this.options.maxMessageBytes),
    });
    const maxBytes = MAX_REPLAY_MESSAGES_OF_MAX_SIZE * this.options.maxMessageBytes;
    let bytes = 0;
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
        bytes += frames[2]!.length;
        if (bytes > maxBytes) break;
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
