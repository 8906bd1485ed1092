/** What one read of an engine's /metrics told the router (fields absent when not exposed). */
export type EngineKind = "sglang" | "vllm";

export interface MetricsReading {
  readonly engine: EngineKind;
  /** Requests waiting in the engine's queue (summed over DP ranks / engines). */
  readonly queued?: number;
  /** Requests in the running batch. */
  readonly running?: number;
  /** Fraction of the KV cache in use, 0..1 (mean over ranks). */
  readonly kvUsage?: number;
  /** KV cache capacity in tokens, when the metrics carry it. */
  readonly capacityTokens?: number;
  /** Tokens a KV block (vLLM's cache_config_info block_size), when the metrics carry it. */
  readonly blockSizeTokens?: number;
  /** Data-parallel ranks, when the metrics show more than one (vLLM: one `engine` label each). */
  readonly dpSize?: number;
}
