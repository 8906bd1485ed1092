import type { IncomingMessage } from "node:http";
import { RouterError } from "../errors.js";
import { ClientGoneError } from "../proxy/cancel.js";
import { NestingScan } from "../proxy/json-depth.js";
import type { BodyLease } from "./body-budget.js";
import type { GateTurn, GateWait, LargeBodyGate } from "./large-body-gate.js";

/** Bounds on reading one request body (see docs/reliability.md, "Reading request bodies"). */
export interface BodyReadLimits {
  /** --max-payload-size */
  maxBytes: number;
  /** --body-read-timeout-secs: the whole body, from when the route starts reading it. */
  totalTimeoutMs: number;
  /** --body-idle-timeout-secs: silence between two chunks. */
  idleTimeoutMs: number;
  /**
   * --body-min-rate-bytes: after a first idle-timeout's worth of grace, the body must average at
   * least this many bytes a second (0 = off). Like Apache's mod_reqtimeout MinRate, each byte
   * received extends the allowed time, so a client dripping a byte every few seconds is cut off.
   */
  minBytesPerSec: number;
  /**
   * The nesting a JSON body may have (proxy/json-depth.ts MAX_BODY_NESTING), scanned as its
   * chunks arrive; undefined: not checked here.
   */
  maxNesting?: number;
  /**
   * Top-level fields whose strings are bounded as the chunks arrive (field -> most characters,
   * proxy/json-depth.ts NestingScan), and the error for one that is longer; undefined: none.
   */
  boundedFields?: BoundedFields;
}

export interface BoundedFields {
  readonly chars: ReadonlyMap<string, number>;
  refuse(field: string, chars: number): RouterError;
}

/**
 * Reads a request body into one Buffer, refusing more than `maxBytes` bytes: at once from
 * Content-Length, or as soon as a chunked body crosses the limit. Nothing is sent to a worker
 * before the whole body is here, so a 413 never costs a worker anything. The bytes are covered by
 * `lease` (the router-wide body budget) as they arrive; a body that arrives too slowly gets 408.
 * A large body (declared, or once it has grown large) is read only in its turn at `gate`: until
 * then its socket is paused, and its read clocks stand still.
 */
export function readBody(
  incoming: IncomingMessage,
  limits: BodyReadLimits,
  lease?: BodyLease,
  gate?: LargeBodyGate,
): Promise<Buffer> {
  const declared = incoming.headers["content-length"];
  if (declared !== undefined && Number(declared) > limits.maxBytes) {
    return Promise.reject(tooLarge(limits.maxBytes));
  }
  // Nothing is reserved from the declared length: the budget grows with the bytes that arrive,
  // so a client declaring a large body and sending it slowly holds only what it sent.
  const declaredBytes = declared === undefined ? Number.NaN : Number(declared);
  // A declared body must keep the pace that ends it within --body-read-timeout-secs: the larger
  // it says it is, the faster it must come (never slower than --body-min-rate-bytes).
  const minRate =
    limits.minBytesPerSec > 0 && Number.isFinite(declaredBytes)
      ? Math.max(limits.minBytesPerSec, (declaredBytes * 1000) / limits.totalTimeoutMs)
      : limits.minBytesPerSec;
  return new Promise((resolve, reject) => {
    const sink = new BodySink(declaredBytes);
    const fields = limits.boundedFields;
    const scan =
      limits.maxNesting === undefined && fields === undefined
        ? undefined
        : new NestingScan(limits.maxNesting ?? Number.POSITIVE_INFINITY, fields?.chars);
    let size = 0;
    let startedAt = Date.now();
    let lastChunkAt = startedAt;
    let timer: NodeJS.Timeout | undefined;
    /** The body's turn at the gate, once it is large; left when the read ends, however. */
    let turn: GateTurn | undefined;
    /** Waiting for that turn: the socket is paused, the read's clocks stopped. */
    let waiting: { wait: GateWait; since: number; poke: NodeJS.Timeout } | undefined;

    const rateDeadline = () => startedAt + limits.idleTimeoutMs + (size * 1000) / minRate;
    /** The deadline that has passed at `now`, if any (idle, then total, then rate). */
    const expired = (now: number): BodyTimeoutKind | undefined => {
      if (lastChunkAt + limits.idleTimeoutMs <= now) return "idle";
      if (startedAt + limits.totalTimeoutMs <= now) return "total";
      if (minRate > 0 && rateDeadline() <= now) return "rate";
      return undefined;
    };
    /**
     * One timer, set to the earliest deadline. Chunks only ever move deadlines later (the idle one
     * with each chunk, the rate one with each byte), so they leave the timer alone: when it fires
     * early, it sets itself again for the deadline that is now the earliest. A body of a thousand
     * chunks costs one timer, not a thousand. Computed without a list: this runs for every body.
     */
    const arm = () => {
      let earliest = Math.min(
        lastChunkAt + limits.idleTimeoutMs,
        startedAt + limits.totalTimeoutMs,
      );
      if (minRate > 0) earliest = Math.min(earliest, rateDeadline());
      timer = setTimeout(onTimer, Math.max(0, earliest - Date.now()));
    };
    const onTimer = () => {
      const kind = expired(Date.now());
      if (kind === undefined) return arm();
      fail(bodyTimeout(kind, limits, size, minRate));
    };
    /** Until the read ends, however. */
    let reading = true;
    /**
     * The clocks' timer, set once this read's bytes have been handled: a body that came with its
     * headers (nearly every one) has ended by then and needs none. A timer set and cleared for
     * every request cost its allocation and Node's timer list made and dropped each time.
     */
    const armWhileReading = () => {
      if (reading && timer === undefined && waiting === undefined) arm();
    };
    const cleanup = () => {
      reading = false;
      if (timer !== undefined) clearTimeout(timer);
      if (waiting !== undefined) {
        clearInterval(waiting.poke);
        waiting.wait.cancel();
        waiting = undefined;
      }
      turn?.leave();
      incoming.off("data", onData);
      incoming.off("end", onEnd);
      incoming.off("error", onError);
      incoming.off("aborted", onAborted);
    };
    const fail = (err: Error) => {
      cleanup();
      sink.release();
      // Stop reading; the answer goes out and the rest of the body is drained or cut (linger.ts).
      incoming.pause();
      reject(err);
    };
    /** Fails on `chunk`, which is not kept: its memory goes back at once (releaseChunk). */
    const refuse = (chunk: Buffer, err: Error) => {
      if (incoming.listenerCount("data") === 1) releaseChunk(chunk);
      fail(err);
    };
    /**
     * Whether reading goes on: yes for a small body or one holding its turn; else the socket is
     * paused until the turn comes (or the wait times out: 503 large_body_busy).
     */
    const mayRead = (bytes: number): boolean => {
      if (gate === undefined || turn !== undefined || !gate.isLarge(bytes)) return true;
      turn = gate.tryEnter();
      if (turn !== undefined) return true;
      incoming.pause();
      if (timer !== undefined) clearTimeout(timer);
      const wait = gate.wait();
      // Paused, the socket is not polled: a client that hangs up is not seen. Now and then it is
      // read again, one chunk at most (the paused stream buffers it), to notice an end.
      const poke = setInterval(() => pokeWhileLight(incoming), POKE_EVERY_MS);
      waiting = { wait, since: Date.now(), poke };
      wait.turn.then(
        (granted) => {
          if (waiting?.wait !== wait) return granted.leave();
          clearInterval(poke);
          // The time spent waiting does not count against the body's own read clocks.
          const waited = Date.now() - waiting.since;
          waiting = undefined;
          turn = granted;
          startedAt += waited;
          lastChunkAt += waited;
          arm();
          incoming.resume();
        },
        (err: Error) => {
          if (waiting?.wait === wait) fail(err);
        },
      );
      return false;
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limits.maxBytes) return refuse(chunk, tooLarge(limits.maxBytes));
      // Scanned before it is kept: the chunk that proves the body too deep, or a bounded field too
      // long, is refused at once, never copied, and what follows is drained like any early
      // answer's (routes/linger.ts). Closing instead cost more: a new connection for every refused
      // body cost the router about twice the CPU of draining the rest of a 240 KB one, and the
      // client more too.
      if (scan?.push(chunk) === true) {
        const { overlong } = scan;
        return refuse(
          chunk,
          overlong !== undefined && fields !== undefined
            ? fields.refuse(overlong.field, overlong.chars)
            : tooDeep(limits.maxNesting as number),
        );
      }
      try {
        lease?.cover(size);
      } catch (err) {
        return refuse(chunk, err as Error);
      }
      // Copied into the body's buffer, the piece is spent: its memory goes back now (releaseChunk).
      if (sink.add(chunk) && incoming.listenerCount("data") === 1) releaseChunk(chunk);
      lastChunkAt = Date.now();
      if (turn === undefined && waiting === undefined) mayRead(size);
    };
    const onEnd = () => {
      cleanup();
      resolve(sink.body());
    };
    const onError = (err: Error) => {
      cleanup();
      reject(err);
    };
    const onAborted = () => {
      cleanup();
      reject(new ClientGoneError());
    };
    incoming.on("data", onData);
    incoming.on("end", onEnd);
    incoming.on("error", onError);
    incoming.on("aborted", onAborted);
    // Microtasks run after the read that brought the headers has been parsed whole, body included.
    if (mayRead(Number.isFinite(declaredBytes) ? declaredBytes : 0))
      queueMicrotask(armWhileReading);
  });
}

/** How often a paused large body's socket is read again to notice a client that hung up. */
const POKE_EVERY_MS = 1000;

/** Bytes a paused body may hold unread before its socket is no longer read to watch for an end. */
export const POKE_HOLD_BYTES = 64 * 1024;

/**
 * Reads a paused body's socket once more, unless it already holds POKE_HOLD_BYTES: each read can
 * take one more chunk (up to 64 KiB) that no budget covers, so a client that keeps sending is not
 * watched for a hang-up any more (its wait still ends at --large-body-wait-secs) and holds at most
 * about 128 KiB, not a chunk for every second of its wait.
 */
export function pokeWhileLight(incoming: Pick<IncomingMessage, "readableLength" | "socket">): void {
  if (incoming.readableLength < POKE_HOLD_BYTES) incoming.socket?.resume();
}

/**
 * A body declared larger than this is written into one buffer of its declared size as it arrives
 * (each chunk copied once, when it comes); a smaller one is kept as its chunks and joined at the
 * end, which for one chunk, most bodies, costs nothing.
 */
const FILL_FROM_BYTES = 64 * 1024;

/**
 * Where a body's bytes go. Joining the chunks of a 60 MB body at its end was one copy of 60 MB on
 * the event loop (tens of ms quiet, hundreds under load, for every such body); writing them into
 * a buffer of the declared length as they come spreads the copying over the arrivals. The buffer
 * is uninitialized memory, so its pages cost RSS only once bytes are written to them: a client
 * that declares 64 MiB and sends 500 bytes holds 500 bytes of RSS (and of the body budget).
 */
class BodySink {
  private readonly chunks: Buffer[] = [];
  private filled: Buffer | undefined;
  private size = 0;

  /**
   * The buffer is made with the first chunk kept, not before: a body refused at its first chunk
   * (nested too deep) costs no allocation, and no garbage collection of it.
   */
  constructor(private declared: number) {}

  /** Takes the next piece; true when it was copied (and is not kept). */
  add(chunk: Buffer): boolean {
    if (this.declared > FILL_FROM_BYTES && Number.isSafeInteger(this.declared)) {
      try {
        this.filled = Buffer.allocUnsafeSlow(this.declared);
      } catch {
        // No address space for it (never expected on 64 bits): chunks, joined at the end.
      }
      this.declared = 0;
    }
    const { filled } = this;
    // Node's parser delivers no more than the Content-Length; a chunk past it is not the body's.
    if (filled !== undefined) {
      this.size += chunk.copy(filled, this.size);
      return true;
    }
    this.chunks.push(chunk);
    this.size += chunk.length;
    return false;
  }

  /** Once body() has handed the bytes out, they are the request's: never released here. */
  private handedOut = false;

  /** The body was refused: the memory of what was kept goes back now, not at a collection. */
  release(): void {
    if (this.handedOut) return;
    if (this.filled !== undefined) releaseChunk(this.filled);
    for (const chunk of this.chunks) releaseChunk(chunk);
    this.chunks.length = 0;
    this.filled = undefined;
  }

  body(): Buffer {
    this.handedOut = true;
    if (this.filled !== undefined) {
      return this.size === this.filled.length ? this.filled : this.filled.subarray(0, this.size);
    }
    const { chunks } = this;
    return chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, this.size);
  }
}

/**
 * Frees a body piece's memory now, when the piece is the whole of its ArrayBuffer, as each piece
 * Node's HTTP parser hands over is (a copy of its own), and nothing else holds it. Dropped, it
 * would count as V8's external memory until a collection, and every 64 MB of that starts a full
 * one: a flood of refused bodies, each a 64 KB first piece, made several a second, and a 60 MB
 * body copied into its buffer piece by piece one more. Detaching it (ArrayBuffer transfer to
 * nothing) frees it and its count at once.
 */
export function releaseChunk(chunk: Uint8Array): void {
  const memory = chunk.buffer as ArrayBuffer & { transfer?(length: number): ArrayBuffer };
  if (chunk.byteOffset === 0 && chunk.byteLength === memory.byteLength) memory.transfer?.(0);
}

type BodyTimeoutKind = "idle" | "total" | "rate";

function bodyTimeout(
  kind: BodyTimeoutKind,
  limits: BodyReadLimits,
  size: number,
  minRate: number,
): RouterError {
  const secs = (ms: number) => `${ms / 1000} s`;
  const why = {
    idle: `no data for ${secs(limits.idleTimeoutMs)} (--body-idle-timeout-secs)`,
    total: `not complete after ${secs(limits.totalTimeoutMs)} (--body-read-timeout-secs)`,
    rate:
      minRate > limits.minBytesPerSec
        ? `arriving slower than ${Math.ceil(minRate)} bytes/s, the pace its Content-Length needs to end within ${secs(limits.totalTimeoutMs)} (--body-read-timeout-secs)`
        : `arriving slower than ${limits.minBytesPerSec} bytes/s (--body-min-rate-bytes)`,
  }[kind];
  return new RouterError("body_timeout", `Request body timed out after ${size} bytes: ${why}.`);
}

function tooDeep(limit: number): RouterError {
  return new RouterError(
    "invalid_request",
    `Request body is nested deeper than ${limit} levels; no engine accepts that.`,
  );
}

function tooLarge(limit: number): RouterError {
  return new RouterError(
    "payload_too_large",
    `Request body exceeds the limit of ${limit} bytes (--max-payload-size).`,
  );
}
