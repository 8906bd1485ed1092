import type { OpOrder } from "./op-order.js";
import { READ_BLOCK_MS, type RedisLink } from "./redis-link.js";
import type { StateKeys } from "./state-keys.js";
import {
  decodeOp,
  MAX_FIELD_CHARS,
  MAX_FIELDS,
  type OpCodec,
  type OpStamp,
  opStamp,
  type RejectReason,
  type StateOp,
} from "./state-op.js";

export interface OpsReaderOptions {
  replicaId: string;
  /**
   * Replicas whose index ops reach this one another way (radixgate-cluster's sibling processes, over
   * the local channel): skipped here, so a decision is not applied twice, nor after its truncate.
   */
  skipIndexOpsOf?: (replicaId: string) => boolean;
  keys: StateKeys;
  /** Checks each entry's signature (the secret, and the stream's key as its scope). */
  codec: OpCodec;
  /** --state-max-text-chars: an entry with a longer text is dropped unread. */
  maxTextChars: number;
  /** Refuses signed ops written again (out of order, or too old from a writer not yet heard). */
  order: OpOrder;
  /** Applies a peer's op to this replica's own state (never publishes it again); `from`: its writer. */
  apply: (op: StateOp, from: OpStamp & { readonly replica: string }) => void;
  onApplied?: (ops: number) => void;
  /** An entry was dropped: unsigned, badly signed, over the bounds or unreadable. */
  onRejected?: (reason: RejectReason) => void;
  /** The stream was deleted or rewound below the last entry read: reading starts over. */
  onReset?: () => void;
}

/** Entries per XREAD: bounds the work done between two turns of the event loop. */
const READ_COUNT = 256;
/** Wait between two reads after an error (the link reconnects on its own meanwhile). */
const RETRY_MS = 200;
/** While reads come back empty, how often the stream is checked for a reset (one XINFO). */
const RESET_CHECK_MS = 1000;

type XReadReply = [stream: Buffer, entries: [id: Buffer, fields: Buffer[]][]][] | null;

/**
 * Follows the ops stream and applies the other replicas' ops. It starts from the oldest entry
 * still in the stream, so a new replica replays the recent decisions (bounded by
 * --state-stream-length) before following new ones; after an outage it goes on from the last
 * entry it applied, so it catches up on whatever the stream still holds: entries trimmed away
 * meanwhile are lost, by design (old updates are dropped rather than kept without bound).
 *
 * XREAD returns only entries after the last ID read, so a stream that went backwards would stop
 * the reader without a sound: deleted and written again (Redis restarted empty, or someone ran
 * DEL) after an entry with an ID far in the future, or a failover to a replica that had not yet
 * received the newest entries, on a clock behind the old primary's. So while reads come back
 * empty, the reader compares the stream's last generated ID with its own once a second; a stream
 * that is gone or behind it is read again from its start (and counted): the replay applies
 * decisions twice at worst, which inserts nothing new.
 */
export class OpsReader {
  private lastId = "0-0";
  private lastResetCheck = 0;
  private running = false;
  private loop: Promise<void> | undefined;
  /** Resolved whenever a read returns fewer entries than asked: the reader is caught up. */
  private caughtUpWaiters: (() => void)[] = [];

  constructor(
    private readonly link: RedisLink,
    private readonly options: OpsReaderOptions,
  ) {}

  /** The ID of the last entry read: everything up to it is applied (or was this replica's own). */
  get position(): string {
    return this.lastId;
  }

  /** Before start(): read only the entries after `id` (a snapshot covers those up to it). */
  startAfter(id: string): void {
    if (!this.running && /^\d+-\d+$/.test(id)) this.lastId = id;
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.loop = this.run();
  }

  /** Resolves once the reader has read everything in the stream, or after `timeoutMs`. */
  caughtUp(timeoutMs: number): Promise<boolean> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(false), timeoutMs);
      timer.unref();
      this.caughtUpWaiters.push(() => {
        clearTimeout(timer);
        resolve(true);
      });
    });
  }

  private async run(): Promise<void> {
    const { keys } = this.options;
    while (this.running) {
      if (this.link.reader.status !== "ready") {
        await sleep(RETRY_MS);
        continue;
      }
      let reply: XReadReply;
      try {
        // A short block when waiters want to know that the stream is read to its end.
        const block = this.caughtUpWaiters.length > 0 ? 1 : READ_BLOCK_MS;
        // Buffers, not strings: an oversized entry is measured and dropped without ever being
        // decoded into a JavaScript string (twice its bytes, and the time to decode them).
        reply = (await this.link.reader.xreadBuffer(
          "COUNT",
          READ_COUNT,
          "BLOCK",
          block,
          "STREAMS",
          keys.ops,
          this.lastId,
        )) as XReadReply;
      } catch {
        if (this.running) await sleep(RETRY_MS);
        continue;
      }
      const entries = reply?.[0]?.[1] ?? [];
      this.applyEntries(entries);
      if (entries.length === 0 && Date.now() - this.lastResetCheck >= RESET_CHECK_MS) {
        this.lastResetCheck = Date.now();
        await this.checkReset();
      }
      if (entries.length < READ_COUNT) {
        const waiters = this.caughtUpWaiters;
        this.caughtUpWaiters = [];
        for (const resolve of waiters) resolve();
      } else {
        // Let requests run between two full batches of a long replay.
        await new Promise((resolve) => setImmediate(resolve));
      }
    }
  }

  /** Starts over from the stream's beginning if it is gone or its newest ID is behind ours. */
  private async checkReset(): Promise<void> {
    if (this.lastId === "0-0") return;
    let behind: boolean;
    try {
      const info = (await this.link.reader.xinfo("STREAM", this.options.keys.ops)) as unknown[];
      const at = info.indexOf("last-generated-id");
      const last = at >= 0 ? info[at + 1] : undefined;
      if (typeof last !== "string") return;
      behind = compareIds(last, this.lastId) < 0;
    } catch (err) {
      // No such key: the stream was deleted (or Redis lost it); anything else: try again later.
      behind = /no such key/i.test((err as Error).message ?? "");
    }
    if (!behind) return;
    this.lastId = "0-0";
    this.options.onReset?.();
  }

  private applyEntries(entries: readonly [Buffer, Buffer[]][]): void {
    let applied = 0;
    for (const [id, raw] of entries) {
      this.lastId = id.toString("latin1");
      const fields = fieldStrings(raw, this.options.maxTextChars);
      const decoded =
        fields === undefined
          ? ({ rejected: "oversize" } as const)
          : decodeOp(fields, this.options.codec, this.options.maxTextChars);
      if ("rejected" in decoded) {
        this.options.onRejected?.(decoded.rejected);
        continue;
      }
      const stamp = opStamp(fields as string[]);
      const membership = decoded.op.kind === "add" || decoded.op.kind === "remove";
      const refused =
        stamp === undefined
          ? "unreadable"
          : this.options.order.admit(decoded.replica, stamp, membership);
      if (refused !== undefined) {
        this.options.onRejected?.(refused);
        continue;
      }
      // Own decisions are already in the index. Own membership ops are applied like a peer's
      // (a no-op when nothing changed since), so that replaying an old "remove" before this
      // replica's own later "add" of the same worker ends with the worker present.
      const own = decoded.replica === this.options.replicaId;
      const indexOp = decoded.op.kind === "insert" || decoded.op.kind === "truncate";
      if (indexOp && (own || this.options.skipIndexOpsOf?.(decoded.replica) === true)) continue;
      try {
        this.options.apply(decoded.op, { replica: decoded.replica, ...(stamp as OpStamp) });
        if (!own) applied += 1;
      } catch {
        // A peer's op this replica cannot apply (e.g. a worker URL it refuses): skip it.
      }
    }
    if (applied > 0) this.options.onApplied?.(applied);
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
  }
}

/**
 * An entry's fields as strings, or undefined when one is over its bound in bytes (a UTF-16 code
 * unit takes at most 3 bytes of UTF-8, so `chars * 3` bytes can never hold a text within bounds;
 * decodeOp then checks the exact length in characters).
 */
function fieldStrings(raw: readonly Buffer[], maxTextChars: number): string[] | undefined {
  if (raw.length > MAX_FIELDS) return undefined;
  const out: string[] = new Array(raw.length);
  for (let i = 0; i < raw.length; i++) {
    const field = raw[i] as Buffer;
    const isText = i % 2 === 1 && raw[i - 1]?.length === 1 && raw[i - 1]?.[0] === 0x78; // "x"
    if (field.length > (isText ? maxTextChars : MAX_FIELD_CHARS) * 3) return undefined;
    out[i] = field.toString("utf8");
  }
  return out;
}

/** Compares two stream IDs ("ms-seq"; each part may exceed 2^53). */
export function compareIds(a: string, b: string): number {
  const [aMs, aSeq] = splitId(a);
  const [bMs, bSeq] = splitId(b);
  if (aMs !== bMs) return aMs < bMs ? -1 : 1;
  if (aSeq !== bSeq) return aSeq < bSeq ? -1 : 1;
  return 0;
}

function splitId(id: string): [bigint, bigint] {
  const [ms = "0", seq = "0"] = id.split("-");
  try {
    return [BigInt(ms), BigInt(seq)];
  } catch {
    return [0n, 0n];
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
