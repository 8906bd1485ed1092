/**
 * The simulator's KV-event publisher, over real ZMQ sockets, as vLLM's and SGLang's
 * ZmqEventPublisher do (vllm/distributed/kv_events.py, sglang/srt/disaggregation/kv_events.py):
 * a PUB socket sends [topic, sequence, payload] per batch; a ROUTER socket answers a replay
 * request (the first wanted sequence, 8 big-endian bytes) with every buffered batch from there on,
 * then the end marker. Events raised in one turn of the event loop go out as one batch.
 *
 * Test knobs: drop the next batches (they keep their sequence numbers and stay replayable, as a
 * message lost between the sockets would), restart (the sequence starts again at 0), and take the
 * sockets down and up again on the same ports (an engine process restarting: subscribers see a
 * disconnection, and what is published meanwhile reaches nobody but stays replayable).
 */
import { Publisher, Router } from "zeromq";
import { encodeSequence } from "../src/kv-events/decode.js";
import type { KvCacheListener, SimMedium } from "./kv-cache.js";
import {
  encodeBatch,
  type KvEncoding,
  type WireBatch,
  type WireEvent,
} from "./kv-event-encoder.js";

export interface SimKvPublisherOptions {
  encoding: KvEncoding;
  host: string;
  topic?: string;
  /** Batches kept for replay (vLLM's buffer_steps, default 10 000). */
  bufferSteps?: number;
  /** No replay socket (an engine started without replay_endpoint). */
  noReplay?: boolean;
  /** Tag every batch with this data-parallel rank (vLLM does, rank 0 included; SGLang does not). */
  dataParallelRank?: number;
}

const END_SEQUENCE = encodeSequence(-1n);

export class SimKvPublisher implements KvCacheListener {
  private pub = newPublisher();
  private replay: Router | undefined;
  private readonly topic: Buffer;
  private readonly buffer: { sequence: bigint; payload: Uint8Array }[] = [];
  private pending: WireEvent[] = [];
  private flushScheduled = false;
  /** One send at a time: a zeromq socket refuses a second send while one is under way. */
  private sending: Promise<void> = Promise.resolve();
  private nextSequence = 0n;
  private dropRemaining = 0;
  private replayGate: Promise<void> | undefined;
  /** Replay requests received. */
  replayRequests = 0;
  private closed = false;
  /** Batches published (dropped ones included). */
  batches = 0;
  endpoint = "";
  replayEndpoint: string | undefined;

  constructor(private readonly options: SimKvPublisherOptions) {
    this.topic = Buffer.from(options.topic ?? "");
    this.replay = options.noReplay ? undefined : new Router({ linger: 0 });
  }

  /** Binds both sockets, on the endpoints given or on free ports of the host. */
  async bind(endpoint?: string, replayEndpoint?: string): Promise<void> {
    const host = this.options.host.includes(":") ? `[${this.options.host}]` : this.options.host;
    await this.pub.bind(endpoint ?? `tcp://${host}:*`);
    this.endpoint = this.pub.lastEndpoint ?? "";
    if (this.replay !== undefined) {
      await this.replay.bind(replayEndpoint ?? `tcp://${host}:*`);
      this.replayEndpoint = this.replay.lastEndpoint ?? undefined;
      void this.serveReplay(this.replay);
    }
  }

  /** Closes both sockets (the engine process is gone); batches raised meanwhile reach nobody. */
  async stop(): Promise<void> {
    await this.sending;
    this.pub.close();
    this.replay?.close();
  }

  /** New sockets on the same endpoints, after `stop` (the engine process is back). */
  async rebind(): Promise<void> {
    await this.sending;
    this.pub = newPublisher();
    await this.pub.bind(this.endpoint);
    if (this.replay !== undefined) {
      this.replay = new Router({ linger: 0 });
      await this.replay.bind(this.replayEndpoint!);
      void this.serveReplay(this.replay);
    }
  }

  stored(
    hashes: number[],
    parent: number | null,
    tokens: number[],
    medium: SimMedium = "GPU",
  ): void {
    this.push({
      type: "BlockStored",
      blockHashes: hashes,
      parentHash: parent,
      tokenIds: tokens,
      // A block named by its hash alone has no tokens and block size 0 (vLLM's placeholder).
      blockSize: tokens.length / hashes.length,
      loraId: null,
      medium,
    });
  }

  removed(hashes: number[], medium: SimMedium = "GPU"): void {
    this.push({ type: "BlockRemoved", blockHashes: hashes, medium });
  }

  cleared(): void {
    this.push({ type: "AllBlocksCleared" });
  }

  /** The next `n` batches are not sent (a lost message): the subscriber sees a gap. */
  dropNext(n: number): void {
    this.dropRemaining = n;
  }

  /**
   * Replay requests are held (received, not answered) until the returned function is called: a
   * test publishes live batches while a subscriber's replay is under way.
   */
  holdReplays(): () => void {
    let release = () => {};
    this.replayGate = new Promise<void>((resolve) => {
      release = resolve;
    });
    return () => {
      this.replayGate = undefined;
      release();
    };
  }

  /** An engine restart: the sequence starts again at 0 and the replay buffer is empty. */
  restart(): void {
    this.pending = [];
    this.buffer.length = 0;
    this.nextSequence = 0n;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.pub.close();
    this.replay?.close();
  }

  private push(event: WireEvent): void {
    this.pending.push(event);
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(() => {
      this.flushScheduled = false;
      this.sending = this.sending.then(() => this.flush());
    });
  }

  private async flush(): Promise<void> {
    if (this.closed || this.pending.length === 0) return;
    const batch: WireBatch = {
      ts: Date.now() / 1000,
      events: this.pending,
      dataParallelRank: this.options.dataParallelRank ?? null,
    };
    this.pending = [];
    const payload = encodeBatch(batch, this.options.encoding);
    const sequence = this.nextSequence++;
    this.buffer.push({ sequence, payload });
    if (this.buffer.length > (this.options.bufferSteps ?? 10_000)) this.buffer.shift();
    this.batches++;
    if (this.dropRemaining > 0) {
      this.dropRemaining--;
      return;
    }
    try {
      await this.pub.send([this.topic, encodeSequence(sequence), payload]);
    } catch {
      // Closed: the simulator is shutting down, or its sockets are down (`stop`).
    }
  }

  private async serveReplay(router: Router): Promise<void> {
    try {
      for await (const frames of router) {
        if (frames.length !== 3) continue;
        const [client, , start] = frames as [Buffer, Buffer, Buffer];
        const from = start.length === 8 ? start.readBigInt64BE(0) : 0n;
        this.replayRequests++;
        await this.replayGate;
        for (const { sequence, payload } of this.buffer) {
          if (sequence >= from) await router.send([client, "", encodeSequence(sequence), payload]);
        }
        await router.send([client, "", END_SEQUENCE, ""]);
      }
    } catch {
      // The socket closed.
    }
  }
}

function newPublisher(): Publisher {
  return new Publisher({ linger: 0, sendHighWaterMark: 100_000 });
}
