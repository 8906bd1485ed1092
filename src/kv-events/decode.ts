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
import type { EngineHash, KvEvent } from "../index/block-events.js";
import { type HashList, HashListBuilder } from "../index/hash-list.js";
import { isTokenId } from "../index/tokenize-input.js";
import { KvDecodeError } from "./decode-error.js";
import type { EventBatch } from "./events.js";
import { type Int64, MsgpackReader } from "./msgpack-reader.js";

export { KvDecodeError };

/**
 * A batch above this size is decoded over several turns of the event loop (decodeBatchInSlices),
 * ITEMS_PER_TURN values (msgpack-reader.ts) a turn.
 */
export const DECODE_SLICE_BYTES = 64 * 1024;

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

/** A msgpack event batch, positional or keyed; its block hashes packed (hash-list.ts). */
export function decodeBatch(payload: Uint8Array): EventBatch {
  const steps = batchOf(payload);
  for (;;) {
    const step = guarded(steps);
    if (step.done === true) return step.value;
  }
}

/**
 * decodeBatch over several turns of the event loop when the payload is larger than
 * DECODE_SLICE_BYTES: ITEMS_PER_TURN values a turn, read from the bytes as they come (no
 * generic decode of the whole batch first). A 3.9 MB batch of 330k blocks held requests and
 * /health for 340-500 ms when decoded at once.
 */
export async function decodeBatchInSlices(payload: Uint8Array): Promise<EventBatch> {
  if (payload.length <= DECODE_SLICE_BYTES) return decodeBatch(payload);
  const steps = batchOf(payload);
  for (;;) {
    const step = guarded(steps);
    if (step.done === true) return step.value;
    await nextTurn();
  }
}

/** One step of the decode; anything thrown that is not a KvDecodeError becomes one. */
function guarded(steps: Generator<void, EventBatch>): IteratorResult<void, EventBatch> {
  try {
    return steps.next();
  } catch (error) {
    if (error instanceof KvDecodeError) throw error;
    throw new KvDecodeError(`not msgpack: ${(error as Error).message}`);
  }
}

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** The batch in a payload, checked; it yields where a turn of the event loop may pass. */
function* batchOf(payload: Uint8Array): Generator<void, EventBatch> {
  const r = new MsgpackReader(payload);
  // Every event's hashes go into the same arrays: each event's list is a view of them.
  const hashes = new HashListBuilder(0);
  let ts: unknown;
  let events: KvEvent[] | undefined;
  let rank: unknown;
  const length = r.arrayLength();
  if (length !== undefined) {
    for (let i = 0; i < length; i++) {
      if (i === 1) {
        events = yield* eventsOf(r, hashes);
        continue;
      }
      const value = yield* r.value(1);
      if (i === 0) ts = value;
      else if (i === 2) rank = value;
    }
  } else {
    const entries = r.mapLength();
    if (entries === undefined) throw new KvDecodeError("batch is neither an array nor a map");
    for (let i = 0; i < entries; i++) {
      const key = r.key();
      if (key === "events") {
        events = yield* eventsOf(r, hashes);
        continue;
      }
      const value = yield* r.value(1);
      if (key === "ts") ts = value;
      else if (key === "data_parallel_rank") rank = value;
    }
  }
  if (!r.done) throw new KvDecodeError("bytes after the batch");
  if (typeof ts !== "number") throw new KvDecodeError("batch ts is not a number");
  if (events === undefined) throw new KvDecodeError("batch events is not an array");
  return { ts, events, dataParallelRank: optionalInt(rank, "data_parallel_rank") };
}

function* eventsOf(r: MsgpackReader, hashes: HashListBuilder): Generator<void, KvEvent[]> {
  const length = r.arrayLength();
  if (length === undefined) throw new KvDecodeError("batch events is not an array");
  const events = new Array<KvEvent>(length);
  for (let i = 0; i < length; i++) {
    if (r.tick()) yield;
    events[i] = yield* decodeEvent(r, hashes);
  }
  return events;
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
/** Fields kept as decoded values (the hashes are read on their own); any other is skipped. */
const VALUE_FIELDS = new Set<string>(
  STORED_FIELDS.filter((f) => f !== "block_hashes" && f !== "parent_block_hash"),
);

/** An event's fields as read; hashes packed. */
interface EventFields {
  tag: unknown;
  blockHashes: HashList | undefined;
  parentHash: EngineHash | null;
  values: Map<string, unknown>;
}

function* decodeEvent(r: MsgpackReader, hashes: HashListBuilder): Generator<void, KvEvent> {
  const fields: EventFields = {
    tag: undefined,
    blockHashes: undefined,
    parentHash: null,
    values: new Map(),
  };
  const length = r.arrayLength();
  if (length !== undefined) {
    if (length > 0) fields.tag = yield* r.value(2);
    const names: readonly string[] =
      fields.tag === "BlockStored"
        ? STORED_FIELDS
        : fields.tag === "BlockRemoved"
          ? REMOVED_FIELDS
          : [];
    for (let i = 1; i < length; i++) yield* readField(r, names[i - 1], fields, hashes);
  } else {
    const entries = r.mapLength();
    if (entries === undefined) throw new KvDecodeError("event is neither an array nor a map");
    for (let i = 0; i < entries; i++) {
      const key = r.key();
      if (key === "type") fields.tag = yield* r.value(2);
      else yield* readField(r, key, fields, hashes);
    }
  }
  return eventOf(fields);
}

function* readField(
  r: MsgpackReader,
  name: string | undefined,
  fields: EventFields,
  hashes: HashListBuilder,
): Generator<void> {
  if (name === "block_hashes") {
    fields.blockHashes = yield* hashList(r, hashes);
  } else if (name === "parent_block_hash") {
    fields.parentHash = hashString(r);
  } else if (name !== undefined && VALUE_FIELDS.has(name)) {
    fields.values.set(name, yield* r.value(2));
  } else {
    yield* r.value(2);
  }
}

function eventOf(fields: EventFields): KvEvent {
  const { tag, values } = fields;
  switch (tag) {
    case "BlockStored": {
      const blockHashes = fields.blockHashes;
      if (blockHashes === undefined) throw new KvDecodeError("block_hashes is not a list");
      const tokenIds = values.get("token_ids");
      if (!Array.isArray(tokenIds) || !tokenIds.every(isTokenId)) {
        throw new KvDecodeError("BlockStored token_ids is not a list of token ids");
      }
      const blockSize = values.get("block_size");
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
      const extraKeys = values.get("extra_keys");
      const mediaKeys = mediaKeysOf(extraKeys, blockHashes.length);
      const parentHash = fields.parentHash;
      const loraName = optionalString(values.get("lora_name"), "lora_name");
      const cacheSalt = parentHash === null ? saltOf(extraKeys, loraName) : undefined;
      return {
        type: "BlockStored",
        blockHashes,
        parentHash,
        tokenIds: tokenIds as number[],
        blockSize,
        loraId: optionalInt(values.get("lora_id"), "lora_id"),
        medium: optionalString(values.get("medium"), "medium"),
        loraName,
        ...(mediaKeys !== null && { mediaKeys }),
        ...(cacheSalt !== undefined && { cacheSalt }),
      };
    }
    case "BlockRemoved":
      if (fields.blockHashes === undefined) throw new KvDecodeError("block_hashes is not a list");
      return {
        type: "BlockRemoved",
        blockHashes: fields.blockHashes,
        medium: optionalString(values.get("medium"), "medium"),
      };
    case "AllBlocksCleared":
      return { type: "AllBlocksCleared" };
    default:
      throw new KvDecodeError(`unknown event type ${JSON.stringify(String(tag)).slice(0, 40)}`);
  }
}

/** Scratch for one int read at a time (decoding is synchronous between its yields). */
const int64: Int64 = { negative: false, hi: 0, lo: 0 };

/** A list of block hashes, straight into the batch's arrays. */
function* hashList(r: MsgpackReader, out: HashListBuilder): Generator<void, HashList> {
  const length = r.arrayLength();
  if (length === undefined) throw new KvDecodeError("block_hashes is not a list");
  const start = out.reserve(length);
  for (let i = 0; i < length; i++) {
    if (r.tick()) yield;
    if (r.int(int64)) out.setInt(start + i, int64.negative, int64.hi, int64.lo);
    else out.setString(start + i, nonIntHash(r.scalar()));
  }
  return out.list(start, length);
}

/** One hash in its string form (a parent: one per event), or null for nil. */
function hashString(r: MsgpackReader): EngineHash | null {
  if (r.int(int64)) {
    const bits = (BigInt(int64.hi) << 32n) | BigInt(int64.lo);
    return (int64.negative ? bits - 2n ** 64n : bits).toString();
  }
  const value = r.scalar();
  return value === null ? null : nonIntHash(value);
}

/** A hash that is not a msgpack int: bytes → "x" + hex; an integral float → its decimal. */
function nonIntHash(value: unknown): EngineHash {
  if (value instanceof Uint8Array) return `x${Buffer.from(value).toString("hex")}`;
  if (typeof value === "number" && Number.isInteger(value)) return value.toString();
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
