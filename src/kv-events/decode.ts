/**
 * Decodes the engines' KV-event messages. Wire format (vLLM vllm/distributed/kv_events.py,
 * ZmqEventPublisher; SGLang python/sglang/srt/disaggregation/kv_events.py, same publisher):
 *
 * - PUB socket, multipart [topic, sequence (8 bytes, big-endian), msgpack payload].
 * - Replay (ROUTER socket): the subscriber sends the first wanted sequence as 8 big-endian bytes;
 *   the publisher answers one [sequence, payload] message per buffered batch from there on, then
 *   [-1 as 8 signed big-endian bytes, empty payload] to end the replay.
 * - The payload is an event batch [ts, events, data_parallel_rank?] or {ts, events,
 *   data_parallel_rank?}; each event is ["BlockStored", ...fields] or {type: "BlockStored", ...}.
 *
 * Everything is validated: a malformed message throws KvDecodeError (the caller counts it and
 * skips it), never anything else.
 */
import { Decoder } from "@msgpack/msgpack";
import type { EngineHash, KvEvent } from "../index/block-events.js";
import { isTokenId } from "../index/tokenize-input.js";
import type { EventBatch } from "./events.js";

export class KvDecodeError extends Error {
  override readonly name = "KvDecodeError";
}

/** Bounds for one payload: a real batch holds a few thousand blocks at most. */
const DECODER_OPTIONS = {
  useBigInt64: true,
  maxStrLength: 1 << 16,
  maxBinLength: 1 << 10,
  maxArrayLength: 1 << 22,
  maxMapLength: 64,
  maxExtLength: 0,
};
const decoder = new Decoder(DECODER_OPTIONS);

/**
 * A batch above this size is decoded over several turns of the event loop (decodeBatchInSlices):
 * one slice of its bytes a turn, then its events and hashes a slice at a time.
 */
export const DECODE_SLICE_BYTES = 64 * 1024;
/** Hashes (or events) checked and converted between two turns. */
const ITEMS_PER_TURN = 8192;

/** Sequence number that ends a replay (vLLM END_SEQ: -1 as 8 signed big-endian bytes). */
export const END_OF_REPLAY = -1n;

/** An 8-byte big-endian sequence number (signed, so END_OF_REPLAY reads as -1). */
export function decodeSequence(frame: Uint8Array): bigint {
  if (frame.length !== 8)
    throw new KvDecodeError(`sequence frame has ${frame.length} bytes, not 8`);
  return new DataView(frame.buffer, frame.byteOffset, 8).getBigInt64(0, false);
}

/** The same frame from a number: the router sends one to ask for a replay from there on. */
export function encodeSequence(sequence: bigint): Uint8Array {
  const frame = new Uint8Array(8);
  new DataView(frame.buffer).setBigInt64(0, sequence, false);
  return frame;
}

/**
 * A PUB message [topic, sequence, payload], its frames checked; the payload is left for
 * `decodeBatch`, since a batch already applied from a replay is skipped undecoded. The topic is
 * not read: the subscriber takes every topic of the one engine it is connected to.
 */
export function decodeEnvelope<P extends Uint8Array>(
  frames: readonly P[],
): { sequence: bigint; payload: P } {
  if (frames.length !== 3) throw new KvDecodeError(`message has ${frames.length} frames, not 3`);
  const sequence = decodeSequence(frames[1]!);
  if (sequence < 0n) throw new KvDecodeError(`negative sequence ${sequence}`);
  return { sequence, payload: frames[2]! };
}

/** A msgpack event batch, positional or keyed. */
export function decodeBatch(payload: Uint8Array): EventBatch {
  let raw: unknown;
  try {
    raw = decoder.decode(payload);
  } catch (error) {
    throw notMsgpack(error);
  }
  const steps = batchOf(raw);
  for (let step = steps.next(); ; step = steps.next()) if (step.done === true) return step.value;
}

const notMsgpack = (error: unknown) =>
  new KvDecodeError(`not msgpack: ${(error as Error).message}`);

/**
 * decodeBatch over several turns of the event loop when the payload is larger than
 * DECODE_SLICE_BYTES: the decoder resumes where the last slice of bytes ended, and the events and
 * hashes are checked ITEMS_PER_TURN at a time. A 3.9 MB batch of 330k blocks held requests and
 * /health for 340-500 ms when decoded at once.
 */
export async function decodeBatchInSlices(payload: Uint8Array): Promise<EventBatch> {
  if (payload.length <= DECODE_SLICE_BYTES) return decodeBatch(payload);
  // A decoder of its own: another stream may be decoding at the same time.
  const raw = await new Decoder(DECODER_OPTIONS).decodeAsync(slices(payload)).catch((error) => {
    throw notMsgpack(error);
  });
  const steps = batchOf(raw);
  for (let step = steps.next(); ; step = steps.next()) {
    if (step.done === true) return step.value;
    await nextTurn();
  }
}

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

async function* slices(payload: Uint8Array): AsyncGenerator<Uint8Array> {
  for (let at = 0; at < payload.length; at += DECODE_SLICE_BYTES) {
    if (at > 0) await nextTurn();
    yield payload.subarray(at, at + DECODE_SLICE_BYTES);
  }
}

/** The batch in a decoded payload, checked; it yields where a turn of the event loop may pass. */
function* batchOf(raw: unknown): Generator<void, EventBatch> {
  let ts: unknown;
  let events: unknown;
  let rank: unknown;
  if (Array.isArray(raw)) {
    [ts, events, rank] = raw;
  } else if (isMap(raw)) {
    ({ ts, events, data_parallel_rank: rank } = raw);
  } else {
    throw new KvDecodeError("batch is neither an array nor a map");
  }
  if (typeof ts !== "number") throw new KvDecodeError("batch ts is not a number");
  if (!Array.isArray(events)) throw new KvDecodeError("batch events is not an array");
  const decoded = new Array<KvEvent>(events.length);
  for (let i = 0; i < events.length; i++) {
    decoded[i] = yield* decodeEvent(events[i]);
    if (i % ITEMS_PER_TURN === ITEMS_PER_TURN - 1) yield;
  }
  return {
    ts,
    events: decoded,
    dataParallelRank: optionalInt(rank, "data_parallel_rank"),
  };
}

/** Field order of the positional encoding, after the tag (vLLM's struct field order). */
const STORED_FIELDS = [
  "block_hashes",
  "parent_block_hash",
  "token_ids",
  "block_size",
  "lora_id",
  "medium",
  "lora_name",
  "extra_keys",
] as const;
const REMOVED_FIELDS = ["block_hashes", "medium"] as const;

function* decodeEvent(raw: unknown): Generator<void, KvEvent> {
  let fields: Record<string, unknown>;
  let tag: unknown;
  if (Array.isArray(raw)) {
    tag = raw[0];
    const names =
      tag === "BlockStored" ? STORED_FIELDS : tag === "BlockRemoved" ? REMOVED_FIELDS : [];
    fields = {};
    names.forEach((name, i) => {
      fields[name] = raw[i + 1];
    });
  } else if (isMap(raw)) {
    tag = raw.type;
    fields = raw;
  } else {
    throw new KvDecodeError("event is neither an array nor a map");
  }
  switch (tag) {
    case "BlockStored": {
      const blockHashes = yield* hashList(fields.block_hashes);
      const tokenIds = fields.token_ids;
      if (!Array.isArray(tokenIds) || !tokenIds.every(isTokenId)) {
        throw new KvDecodeError("BlockStored token_ids is not a list of token ids");
      }
      const blockSize = fields.block_size;
      // Block size 0 without tokens: vLLM's offloading connector names an offloaded block by its
      // hash alone (offloading/events.py `_placeholder_stored`); the index keys it by that hash.
      const placeholder = blockSize === 0 && tokenIds.length === 0;
      if (
        typeof blockSize !== "number" ||
        !Number.isInteger(blockSize) ||
        (blockSize < 1 && !placeholder)
      ) {
        throw new KvDecodeError("BlockStored block_size is not a positive integer");
      }
      const mediaKeys = mediaKeysOf(fields.extra_keys, blockHashes.length);
      const parentHash = fields.parent_block_hash == null ? null : hashOf(fields.parent_block_hash);
      const loraName = optionalString(fields.lora_name, "lora_name");
      const cacheSalt = parentHash === null ? saltOf(fields.extra_keys, loraName) : undefined;
      return {
        type: "BlockStored",
        blockHashes,
        parentHash,
        tokenIds: tokenIds as number[],
        blockSize,
        loraId: optionalInt(fields.lora_id, "lora_id"),
        medium: optionalString(fields.medium, "medium"),
        loraName,
        ...(mediaKeys !== null && { mediaKeys }),
        ...(cacheSalt !== undefined && { cacheSalt }),
      };
    }
    case "BlockRemoved":
      return {
        type: "BlockRemoved",
        blockHashes: yield* hashList(fields.block_hashes),
        medium: optionalString(fields.medium, "medium"),
      };
    case "AllBlocksCleared":
      return { type: "AllBlocksCleared" };
    default:
      throw new KvDecodeError(`unknown event type ${JSON.stringify(String(tag)).slice(0, 40)}`);
  }
}

function isMap(value: unknown): value is Record<string, unknown> {
  return (
    value !== null &&
    typeof value === "object" &&
    !Array.isArray(value) &&
    !ArrayBuffer.isView(value)
  );
}

function* hashList(value: unknown): Generator<void, EngineHash[]> {
  if (!Array.isArray(value)) throw new KvDecodeError("block_hashes is not a list");
  const hashes = new Array<EngineHash>(value.length);
  for (let i = 0; i < value.length; i++) {
    hashes[i] = hashOf(value[i]);
    if (i % ITEMS_PER_TURN === ITEMS_PER_TURN - 1) yield;
  }
  return hashes;
}

/** int (number or 64-bit bigint) → decimal; bytes → "x" + hex. */
function hashOf(value: unknown): EngineHash {
  if (typeof value === "bigint") return value.toString();
  if (typeof value === "number" && Number.isInteger(value)) return value.toString();
  if (value instanceof Uint8Array) return `x${Buffer.from(value).toString("hex")}`;
  throw new KvDecodeError("block hash is neither an int nor bytes");
}

function optionalInt(value: unknown, field: string): number | null {
  if (value == null) return null;
  if (typeof value === "number" && Number.isInteger(value)) return value;
  throw new KvDecodeError(`${field} is not an integer`);
}

function optionalString(value: unknown, field: string): string | null {
  if (value == null) return null;
  if (typeof value === "string") return value;
  throw new KvDecodeError(`${field} is not a string`);
}

/**
 * vLLM's `extra_keys` (one entry per block, null or a tuple; vllm/distributed/kv_events.py
 * BlockStored, filled by vllm/v1/core/kv_cache_utils.py generate_block_hash_extra_keys): the
 * adapter's name and the cache salt are strings; each multimodal item the block covers is an
 * `(identifier, offset)` tuple, prompt embeddings a bytes hash. Those last two make the engine's
 * key of a block differ from what its tokens say (an image's placeholder tokens are the same for
 * every image): they become `mediaKeys`, one string per block (null: none), folded into the
 * index's key so blocks of different images never share one. Null when the event has none.
 */
function mediaKeysOf(value: unknown, blocks: number): (string | null)[] | null {
  if (value == null) return null;
  if (!Array.isArray(value) || value.length !== blocks) {
    throw new KvDecodeError("BlockStored extra_keys is not one entry per block");
  }
  let any = false;
  const keys = value.map((entry) => {
    if (entry == null) return null;
    if (!Array.isArray(entry))
      throw new KvDecodeError("BlockStored extra_keys entry is not a list");
    const media = entry.filter((item) => typeof item !== "string");
    if (media.length === 0) return null;
    any = true;
    return media.map((item) => canonical(item, 0)).join("\u0001");
  });
  return any ? keys : null;
}

/**
 * The cache salt among the first block's extra keys (mediaKeysOf has their checks): vLLM puts the
 * adapter's name first, then the multimodal tuples, then `cache_salt`, the only other string
 * (vllm/v1/core/kv_cache_utils.py generate_block_hash_extra_keys), and only in a sequence's first
 * block. Undefined when there is none.
 */
function saltOf(value: unknown, loraName: string | null): string | undefined {
  if (!Array.isArray(value)) return undefined;
  const first = value[0];
  if (!Array.isArray(first)) return undefined;
  const strings = first.filter((item): item is string => typeof item === "string");
  if (loraName !== null && strings[0] === loraName) strings.shift();
  return strings.length === 0 ? undefined : strings.join("\u0000");
}

/** A decoded msgpack value as a string: the same value gives the same string. */
function canonical(value: unknown, depth: number): string {
  if (typeof value === "string") return JSON.stringify(value);
  if (typeof value === "number" || typeof value === "bigint" || typeof value === "boolean")
    return String(value);
  if (value instanceof Uint8Array) return `x${Buffer.from(value).toString("hex")}`;
  if (Array.isArray(value) && depth < 4)
    return `[${value.map((item) => canonical(item, depth + 1)).join(",")}]`;
  if (value === null) return "null";
  throw new KvDecodeError("BlockStored extra_keys holds a value of an unknown kind");
}
