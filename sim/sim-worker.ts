/**
 * What a simulated worker offers the tests, benches and the CLI that start one (worker.ts makes it):
 * its address, its counters, its faults and its caches.
 */
import type { SimFaults } from "./faults.js";
import type { SimKvPublisher } from "./kv-publisher.js";

export interface SimStats {
  id: string;
  /** Inference requests received (every endpoint that runs the engine), faulted ones included. */
  requests: number;
  /** Sequences running or waiting in the engine, plus requests held by the hang fault. */
  inFlight: number;
  running: number;
  waiting: number;
  hanging: number;
  /** Inference responses sent in full. */
  completed: number;
  /** Inference requests whose client disconnected before the response was complete. */
  aborted: number;
  /** Streams cut by the crashMidStream fault. */
  crashed: number;
  /** Requests answered with an injected fault status (status, failFirst). */
  failed: number;
  /** Requests answered 4xx for bad input. */
  rejected: number;
  /** Requests answered 401 for a missing or wrong --api-key. */
  unauthorized: number;
  /** Prompt tokens admitted to the engine, and of those the ones found in the prefix cache. */
  promptTokens: number;
  cachedTokens: number;
  completionTokens: number;
  /** Fraction of KV blocks held by running requests. */
  kvUsage: number;
  /** KV blocks evicted from the prefix cache so far. */
  kvEvictions: number;
  /** LoRA adapter loads so far (with options.maxLoras; sim/lora-slots.ts). */
  loraLoads?: number;
  /** Requests per path (unknown paths under "unmatched"). */
  endpoints: Record<string, number>;
  /**
   * The W3C trace context of the last inference request: what vLLM and SGLang read to join the
   * caller's trace (vllm/tracing.py extract_trace_context; SGLang --enable-trace).
   */
  lastTraceparent: string | undefined;
  lastTracestate: string | undefined;
  /** The `priority` field of the last inference request's body (undefined when it had none). */
  lastPriority: number | undefined;
}

export interface SimWorker {
  readonly id: string;
  readonly url: string;
  readonly port: number;
  readonly flavor: "sglang" | "vllm";
  /** Prefill or decode with disaggregation (sim/disaggregation.ts); undefined for a regular worker. */
  readonly role: "prefill" | "decode" | undefined;
  /** An SGLang prefill worker's bootstrap server port (what the router's --prefill URL PORT names). */
  readonly bootstrapPort: number | undefined;
  stats(): SimStats;
  faults(): SimFaults;
  setFaults(f: Partial<SimFaults>): void;
  /** The KV-event publisher, when started with `kvEvents` (rank 0's, with `dpSize`). */
  readonly kvEvents: SimKvPublisher | undefined;
  /** Every data-parallel rank's KV-event publisher, rank 0 first (empty without `kvEvents`). */
  readonly kvEventsRanks: readonly SimKvPublisher[];
  /** Inference requests each data-parallel rank served, rank 0 first. */
  rankRequests(): number[];
  /**
   * Drops every cached block nobody holds. `restart` models an engine restart: nothing is
   * announced and the event sequence starts again at 0; otherwise AllBlocksCleared is published
   * (vLLM's reset_prefix_cache).
   */
  clearKvCache(options?: { restart?: boolean }): void;
  /**
   * Tokens of this prompt the engine would find cached now (benchmark diagnostics): on one
   * data-parallel rank, or the best rank's.
   */
  cachedPrefixTokens(promptTokens: readonly number[], rank?: number): number;
  /**
   * The tokens its POST /tokenize answers for this body (`{prompt}` or `{messages}`, with the
   * engine's own tokenizer), or undefined when the body has neither (the endpoint answers 400).
   */
  tokenizeBody(body: unknown): number[] | undefined;
  /** Closes the server and destroys open sockets (hanging and streaming requests included). */
  close(): Promise<void>;
}
