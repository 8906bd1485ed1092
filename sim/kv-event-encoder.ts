/**
 * Encodes KV-event batches the way the engines publish them (src/kv-events/decode.ts has the wire
 * format), in either encoding: "array" (positional, SGLang and older vLLM) or "map" (keyed by
 * field name with a `type` tag, vLLM since 2026). Used by the simulator, benches and tests, never
 * by the router (the sequence frame, which the router sends too, is in decode.ts).
 */
import { Encoder } from "@msgpack/msgpack";

export type KvEncoding = "array" | "map";

/** Hashes on the wire: an int (number or bigint) or bytes, as the engine chose. */
export type WireHash = number | bigint | Uint8Array;

export interface WireStored {
  readonly type: "BlockStored";
  readonly blockHashes: readonly WireHash[];
  readonly parentHash: WireHash | null;
  readonly tokenIds: readonly number[];
  readonly blockSize: number;
  readonly loraId?: number | null;
  readonly medium?: string | null;
  readonly loraName?: string | null;
  /** vLLM's extra_keys: one entry per block (the adapter's name, media items, the cache salt). */
  readonly extraKeys?: readonly (readonly unknown[] | null)[] | null;
}

export interface WireRemoved {
  readonly type: "BlockRemoved";
  readonly blockHashes: readonly WireHash[];
  readonly medium?: string | null;
}

export type WireEvent = WireStored | WireRemoved | { readonly type: "AllBlocksCleared" };

export interface WireBatch {
  readonly ts: number;
  readonly events: readonly WireEvent[];
  readonly dataParallelRank?: number | null;
}

const encoder = new Encoder({ useBigInt64: true });

export function encodeBatch(batch: WireBatch, encoding: KvEncoding): Uint8Array {
  const events = batch.events.map((e) => (encoding === "array" ? eventArray(e) : eventMap(e)));
  // msgspec writes ts as float64; an integral JS number would go out as an int, which the
  // decoder accepts too (it only needs a number).
  const ts = batch.ts;
  const rank = batch.dataParallelRank ?? null;
  const value =
    encoding === "array"
      ? rank === null
        ? [ts, events]
        : [ts, events, rank]
      : rank === null
        ? { ts, events }
        : { ts, events, data_parallel_rank: rank };
  return encoder.encode(value);
}

function eventArray(e: WireEvent): unknown[] {
  switch (e.type) {
    case "BlockStored":
      return [
        e.type,
        e.blockHashes,
        e.parentHash,
        e.tokenIds,
        e.blockSize,
        e.loraId ?? null,
        e.medium ?? null,
        ...(e.loraName != null || e.extraKeys != null ? [e.loraName ?? null] : []),
        ...(e.extraKeys != null ? [e.extraKeys] : []),
      ];
    case "BlockRemoved":
      return [e.type, e.blockHashes, e.medium ?? null];
    case "AllBlocksCleared":
      return [e.type];
  }
}

function eventMap(e: WireEvent): Record<string, unknown> {
  switch (e.type) {
    case "BlockStored":
      return {
        type: e.type,
        block_hashes: e.blockHashes,
        parent_block_hash: e.parentHash,
        token_ids: e.tokenIds,
        block_size: e.blockSize,
        lora_id: e.loraId ?? null,
        medium: e.medium ?? null,
        lora_name: e.loraName ?? null,
        ...(e.extraKeys != null && { extra_keys: e.extraKeys }),
      };
    case "BlockRemoved":
      return { type: e.type, block_hashes: e.blockHashes, medium: e.medium ?? null };
    case "AllBlocksCleared":
      return { type: e.type };
  }
}
