import type { KvEvent } from "../index/block-events.js";

/** One message of an engine's KV-event stream, decoded (the events are index/block-events.ts). */
export interface EventBatch {
  /** Seconds since the epoch, as the engine stamped the batch. */
  readonly ts: number;
  readonly events: readonly KvEvent[];
  /** vLLM's data-parallel rank; null when absent (SGLang, older vLLM). */
  readonly dataParallelRank: number | null;
}
