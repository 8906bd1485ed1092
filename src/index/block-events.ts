/**
 * The KV-cache event model the engines publish, as the precise index applies it (kv-events/
 * decodes the engines' messages into these; the batch around them is kv-events/events.ts).
 *
 * Schema references (checked against the engines' source, not copied):
 * - vLLM: vllm/distributed/kv_events.py (EventBatch, BlockStored, BlockRemoved, AllBlocksCleared;
 *   msgspec structs, `tag=True` so each event names its class; encoded as positional arrays in
 *   older releases and as maps keyed by field name with a `type` tag since 2026).
 * - SGLang: python/sglang/srt/disaggregation/kv_events.py (the same model as positional arrays,
 *   without `medium`; BlockRemoved carries only the hashes).
 */

import type { EngineHash, EngineHashes } from "./hash-list.js";

export type { EngineHash };

export interface BlockStored {
  readonly type: "BlockStored";
  /** One hash per stored block, in sequence order (packed by the decoder: hash-list.ts). */
  readonly blockHashes: EngineHashes;
  /** The hash of the block before the first one; null when the first block starts a sequence. */
  readonly parentHash: EngineHash | null;
  /** The tokens of every stored block, concatenated (blockHashes.length × blockSize). */
  readonly tokenIds: readonly number[];
  readonly blockSize: number;
  readonly loraId: number | null;
  /** vLLM: where the block lives ("GPU", or an offload tier); null when not said. */
  readonly medium: string | null;
  /** vLLM: the adapter's name (preferred over loraId when present). */
  readonly loraName: string | null;
  /**
   * vLLM: per block, what of its extra keys is not the adapter or the salt (multimodal items,
   * prompt-embedding hashes) as one string, null for a block without any; null when not said.
   */
  readonly mediaKeys?: readonly (string | null)[] | null;
  /**
   * vLLM: the request's `cache_salt`, which the engine mixed into the first block of a sequence
   * (from the first block's extra keys, when the event starts one); absent without one.
   */
  readonly cacheSalt?: string | null;
}

export interface BlockRemoved {
  readonly type: "BlockRemoved";
  readonly blockHashes: EngineHashes;
  readonly medium: string | null;
}

export interface AllBlocksCleared {
  readonly type: "AllBlocksCleared";
}

export type KvEvent = BlockStored | BlockRemoved | AllBlocksCleared;

/** The medium the router routes on: blocks elsewhere (CPU offload tiers) are not in the GPU cache. */
export const GPU_MEDIUM = "GPU";
