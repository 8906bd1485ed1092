/** What one read of an engine's /metrics told the router (fields absent when not exposed). */
export type EngineKind = "sglang" | "vllm";

/** One data-parallel rank's own series (fields absent when that rank did not report them). */
export interface RankReading {
  readonly queued?: number;
  readonly running?: number;
  readonly kvUsage?: number;
  readonly capacityTokens?: number;
}

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
  /**
   * Each rank's series, index = rank, when the series carry a rank label (vLLM `engine`, SGLang
   * `dp_rank`) and more than one rank reported; a rank that reported nothing is `{}`.
   */
  readonly ranks?: readonly RankReading[];
  /** vLLM's vllm:lora_requests_info: adapters with requests now, and its bound (max_lora). */
  readonly lora?: { readonly active: readonly string[]; readonly maxLoras?: number | undefined };
}
