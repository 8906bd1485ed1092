/**
 * Every constant of a simulated worker, with its default, in one table. The CLI derives one flag
 * per numeric option from NUMERIC_OPTIONS, so options and flags cannot drift apart.
 */
import type { SimRole } from "./disaggregation.js";
import type { SimFaults } from "./faults.js";
import { DEFAULT_TIMING, type TimingModel } from "./timing.js";

export type SimFlavor = "sglang" | "vllm";
/** The engine a simulated worker plays unless told. */
export const DEFAULT_FLAVOR: SimFlavor = "sglang";

/** Numeric constants: the timing model, the KV cache, and protocol limits. */
export interface SimNumericOptions extends TimingModel {
  /** Real ms per model ms: 1 = real time, 0.01 = 100× faster, 0 = answer at once. */
  timeScale: number;
  /** Most sequences in the running batch (vLLM max_num_seqs, SGLang max_running_requests). */
  maxRunning: number;
  /** Most tokens per step (vLLM max_num_batched_tokens, SGLang chunked_prefill_size). */
  maxBatchTokens: number;
  /** KV cache capacity in tokens. */
  kvCapacityTokens: number;
  /**
   * A CPU tier behind the GPU cache, tokens (0 = none): every computed block is written through
   * to it, as vLLM's offloading connector does, and a prompt's blocks past its GPU hit that the
   * tier holds are loaded back (offloadTokensPerSec) instead of computed (sim/kv-cache.ts).
   */
  cpuTierTokens: number;
  /** Tokens per KV block. */
  blockSize: number;
  /** Longest prompt + output accepted (400 above). */
  maxModelLen: number;
  /** Output tokens when a request does not say (max_tokens / max_new_tokens). */
  defaultMaxTokens: number;
  /** Dimension of the fake embeddings. */
  embeddingDim: number;
  /** Largest request body accepted (413 above). */
  bodyLimitBytes: number;
  /**
   * Model ms a sequence waits before it may join a step (0 = none): a fixed first-token delay on
   * top of the step model, for benchmarks that pace streams (bench:stream).
   */
  firstTokenDelayMs: number;
  /** Prefill/decode hand-off: KV tokens moved per second from prefill to decode (model time). */
  transferTokensPerSec: number;
  /** How long a decode worker waits for its prefill worker's hand-off, real ms. */
  handoffTimeoutMs: number;
  /**
   * SGLang's --priority-scheduling-preemption-threshold (default 10): with priority scheduling, a
   * request preempts running ones only when its priority exceeds theirs by more than this
   * (sim/priority-preemption.ts). The vLLM flavor has no such preemption and ignores it.
   */
  prioritySchedulingPreemptionThreshold: number;
  /**
   * When /metrics' running, waiting and KV usage change (sim/engine-gauges.ts). SGLang's
   * --decode-log-interval (default 40): its gauges are set at each prefill batch and every this
   * many decode steps, and every 30 s while idle; the vLLM flavor sets them after every step.
   * 0: live, either flavor (every read sees the engine as it is).
   */
  decodeLogInterval: number;
}

export interface SimWorkerOptions extends Partial<SimNumericOptions> {
  /** Tag of every response (header x-sim-worker-id); default `sim-<port>`. */
  id?: string;
  /** Default 127.0.0.1. */
  host?: string;
  /** Default 0 (a free port). */
  port?: number;
  /** Which engine's metric names and labels to mimic; default "sglang". */
  flavor?: SimFlavor;
  /** Served model name; default "meta-llama/Llama-3.1-8B-Instruct". */
  model?: string;
  /** More names for the same model (vLLM --served-model-name a b); listed after `model`. */
  modelAliases?: string[];
  /** LoRA adapters served on top of the model (vLLM --lora-modules, SGLang --lora-paths). */
  loraAdapters?: string[];
  /**
   * Adapters loaded at once (vLLM --max-loras, SGLang --max-loras-per-batch), least recently used
   * out first; a request for one not loaded waits `loraLoadMs` (model ms) for its load.
   * Undefined: every listed adapter stays loaded (sim/lora-slots.ts).
   */
  maxLoras?: number;
  loraLoadMs?: number;
  /**
   * vLLM's VLLM_ALLOW_RUNTIME_LORA_UPDATING: /v1/load_lora_adapter and /v1/unload_lora_adapter are
   * served (sim/lora-admin.ts). SGLang serves its /load_lora_adapter routes always.
   */
  loraRuntimeUpdates?: boolean;
  /** SGLang --max-loaded-loras: loads beyond it are refused. Undefined: no bound. */
  maxLoadedLoras?: number;
  /** Initial fault knobs. */
  faults?: Partial<SimFaults>;
  /**
   * Like the engines' --api-key: every path but /health (and the /_sim control paths) needs
   * `Authorization: Bearer <key>`, else 401. SGLang exempts only /health (add_api_key_middleware
   * in sglang/srt/utils); vLLM guards /v1 paths.
   */
  apiKey?: string;
  /**
   * Publish KV-cache events over ZMQ as the engines do (sim/kv-publisher.ts): "array" (SGLang,
   * vLLM before 2026) or "map" (vLLM since 2026) encoding; `noReplay` leaves out the replay socket.
   */
  kvEvents?: { encoding: "array" | "map"; noReplay?: boolean; topic?: string };
  /**
   * Data-parallel ranks (vLLM --data-parallel-size, SGLang --dp-size; default 1): each has its own
   * KV cache (of kvCapacityTokens) and scheduler, and its own KV-event publisher on the rank-0
   * ports + rank (sim/dp-ranks.ts).
   */
  dpSize?: number;
  /**
   * A Hugging Face tokenizer.json (the router's --tokenizer-path): prompts, chat templates and
   * /tokenize use it instead of the stand-in tokenizer (sim/tokenizer.ts), so a router tokenizing
   * locally and this engine agree on the tokens. Generated tokens stay the stand-in's.
   */
  tokenizerPath?: string;
  /**
   * Prefill/decode disaggregation (sim/disaggregation.ts): "prefill" computes prompts and hands
   * their KV off, "decode" needs the hand-off fields (SGLang's bootstrap_*, vLLM's
   * kv_transfer_params) and generates. Default: a regular worker.
   */
  role?: SimRole;
  /** SGLang prefill: the bootstrap server's port (default 0: a free one; see bootstrapPort). */
  bootstrapPort?: number;
  /** SGLang decode: the port asked when the router sends bootstrap_port null (default 8998). */
  defaultBootstrapPort?: number;
  /**
   * Priority scheduling as the flavor's engine does it (vLLM --scheduling-policy priority: lower
   * `priority` first, never preempting for a waiting request; SGLang --enable-priority-scheduling:
   * higher first, preempting past prioritySchedulingPreemptionThreshold). Default off: first
   * come, first served (sim/engine.ts).
   */
  priorityScheduling?: boolean;
  /** SGLang's --disable-priority-preemption: priority orders the queue and preempts nothing. */
  disablePriorityPreemption?: boolean;
  /**
   * What one step computes (sim/engine.ts `prefillFirst`): "mixed" (default, either flavor: vLLM
   * v1's rule, running sequences decode in every step and prefill fills the rest of the token
   * budget) or "prefill-first" (SGLang's rule without --enable-mixed-chunk: a step with prefill
   * work runs it alone, decode waits for a step without any). The default stays "mixed" so that
   * every other bench keeps its figures; bench:admission runs SGLang's rule.
   */
  stepRule?: SimStepRule;
}

export type SimStepRule = "mixed" | "prefill-first";

export interface NumericOptionSpec {
  key: keyof SimNumericOptions;
  description: string;
  integer: boolean;
  /** Smallest allowed value (inclusive). */
  min: number;
}

export const NUMERIC_OPTIONS: readonly NumericOptionSpec[] = [
  { key: "timeScale", description: "real ms per model ms (0 = no delays)", integer: false, min: 0 },
  {
    key: "prefillTokensPerSec",
    description: "prefill throughput, tokens/s",
    integer: false,
    min: 1,
  },
  { key: "stepFloorMs", description: "minimum duration of a step, ms", integer: false, min: 0 },
  {
    key: "decodePerSeqMs",
    description: "step cost per batched sequence, ms",
    integer: false,
    min: 0,
  },
  {
    key: "kvReadMsPer1kTokens",
    description: "step cost per 1000 context tokens read, ms",
    integer: false,
    min: 0,
  },
  { key: "maxRunning", description: "max sequences in the running batch", integer: true, min: 1 },
  {
    key: "maxBatchTokens",
    description: "max tokens per step (chunked prefill)",
    integer: true,
    min: 1,
  },
  { key: "kvCapacityTokens", description: "KV cache capacity, tokens", integer: true, min: 1 },
  { key: "blockSize", description: "tokens per KV block", integer: true, min: 1 },
  { key: "cpuTierTokens", description: "CPU KV tier, tokens (0 = none)", integer: true, min: 0 },
  {
    key: "offloadTokensPerSec",
    description: "CPU tier to GPU KV load, tokens/s",
    integer: false,
    min: 1,
  },
  { key: "maxModelLen", description: "max prompt + output tokens", integer: true, min: 1 },
  { key: "defaultMaxTokens", description: "output tokens when unspecified", integer: true, min: 1 },
  { key: "embeddingDim", description: "dimension of fake embeddings", integer: true, min: 1 },
  { key: "bodyLimitBytes", description: "largest request body, bytes", integer: true, min: 1 },
  {
    key: "firstTokenDelayMs",
    description: "fixed wait before a sequence joins a step, ms",
    integer: false,
    min: 0,
  },
  {
    key: "transferTokensPerSec",
    description: "prefill/decode KV transfer, tokens/s",
    integer: false,
    min: 1,
  },
  {
    key: "handoffTimeoutMs",
    description: "decode: longest wait for the prefill's hand-off, real ms",
    integer: false,
    min: 0,
  },
  {
    key: "prioritySchedulingPreemptionThreshold",
    description: "SGLang priority scheduling: least priority gap (exclusive) that preempts",
    integer: true,
    min: 0,
  },
  {
    key: "decodeLogInterval",
    description: "SGLang: /metrics gauges set every N decode steps and each prefill (0 = live)",
    integer: true,
    min: 0,
  },
];

export const DEFAULT_NUMERIC_OPTIONS: Readonly<SimNumericOptions> = Object.freeze({
  ...DEFAULT_TIMING,
  timeScale: 1,
  maxRunning: 256,
  maxBatchTokens: 8192,
  kvCapacityTokens: 400_000,
  cpuTierTokens: 0,
  blockSize: 16,
  maxModelLen: 131_072,
  defaultMaxTokens: 16,
  embeddingDim: 32,
  bodyLimitBytes: 32 * 1024 * 1024,
  firstTokenDelayMs: 0,
  transferTokensPerSec: 400_000,
  handoffTimeoutMs: 30_000,
  // SGLang's default (python/sglang/srt/server_args.py).
  prioritySchedulingPreemptionThreshold: 10,
  // SGLang's default (python/sglang/srt/server_args.py decode_log_interval).
  decodeLogInterval: 40,
});

const DEFAULT_MODEL = "meta-llama/Llama-3.1-8B-Instruct";

export interface ResolvedSimOptions extends SimNumericOptions {
  id: string | undefined;
  host: string;
  port: number;
  flavor: SimFlavor;
  model: string;
  modelAliases: string[];
  loraAdapters: string[];
  maxLoras: number | undefined;
  loraLoadMs: number;
  loraRuntimeUpdates: boolean;
  maxLoadedLoras: number | undefined;
  apiKey: string | undefined;
  tokenizerPath: string | undefined;
  role: SimRole | undefined;
  bootstrapPort: number;
  defaultBootstrapPort: number;
  priorityScheduling: boolean;
  disablePriorityPreemption: boolean;
  stepRule: SimStepRule;
}

/** Fill defaults and validate; throws RangeError naming the bad option. */
export function resolveOptions(options: SimWorkerOptions = {}): ResolvedSimOptions {
  const numeric = { ...DEFAULT_NUMERIC_OPTIONS };
  for (const spec of NUMERIC_OPTIONS) {
    const value = options[spec.key];
    if (value === undefined) continue;
    if (typeof value !== "number" || !Number.isFinite(value) || value < spec.min) {
      throw new RangeError(`${spec.key} must be a finite number >= ${spec.min}, got ${value}`);
    }
    if (spec.integer && !Number.isInteger(value)) {
      throw new RangeError(`${spec.key} must be an integer, got ${value}`);
    }
    numeric[spec.key] = value;
  }
  if (numeric.kvCapacityTokens < numeric.blockSize) {
    throw new RangeError(
      `kvCapacityTokens (${numeric.kvCapacityTokens}) must hold one block of ${numeric.blockSize}`,
    );
  }
  const port = options.port ?? 0;
  if (!Number.isInteger(port) || port < 0 || port > 65_535) {
    throw new RangeError(`port must be an integer 0-65535, got ${port}`);
  }
  const flavor = options.flavor ?? DEFAULT_FLAVOR;
  if (flavor !== "sglang" && flavor !== "vllm") {
    throw new RangeError(`flavor must be "sglang" or "vllm", got ${String(flavor)}`);
  }
  if (options.role !== undefined && options.role !== "prefill" && options.role !== "decode") {
    throw new RangeError(`role must be "prefill" or "decode", got ${String(options.role)}`);
  }
  const stepRule = options.stepRule ?? "mixed";
  if (stepRule !== "mixed" && stepRule !== "prefill-first") {
    throw new RangeError(`stepRule must be "mixed" or "prefill-first", got ${String(stepRule)}`);
  }
  if (options.id !== undefined && options.id.length === 0)
    throw new RangeError("id must not be empty");
  return {
    ...numeric,
    id: options.id,
    host: options.host ?? "127.0.0.1",
    port,
    flavor,
    model: options.model ?? DEFAULT_MODEL,
    modelAliases: names("modelAliases", options.modelAliases),
    loraAdapters: names("loraAdapters", options.loraAdapters),
    maxLoras: positiveOrUndefined("maxLoras", options.maxLoras),
    loraLoadMs: options.loraLoadMs ?? 100,
    loraRuntimeUpdates: options.loraRuntimeUpdates === true,
    maxLoadedLoras: positiveOrUndefined("maxLoadedLoras", options.maxLoadedLoras),
    apiKey: options.apiKey === "" ? undefined : options.apiKey,
    tokenizerPath: options.tokenizerPath === "" ? undefined : options.tokenizerPath,
    role: options.role,
    bootstrapPort: portOption("bootstrapPort", options.bootstrapPort ?? 0),
    defaultBootstrapPort: portOption("defaultBootstrapPort", options.defaultBootstrapPort ?? 8998),
    priorityScheduling: options.priorityScheduling === true,
    disablePriorityPreemption: options.disablePriorityPreemption === true,
    stepRule,
  };
}

function portOption(option: string, port: number): number {
  if (!Number.isInteger(port) || port < 0 || port > 65_535)
    throw new RangeError(`${option} must be an integer 0-65535, got ${port}`);
  return port;
}

function names(option: string, list: string[] | undefined): string[] {
  if (list === undefined) return [];
  for (const name of list) {
    if (typeof name !== "string" || name.length === 0)
      throw new RangeError(`${option} must be non-empty names, got ${JSON.stringify(name)}`);
  }
  return [...new Set(list)];
}

function positiveOrUndefined(name: string, value: number | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (!Number.isInteger(value) || value < 1)
    throw new RangeError(`${name} must be a positive integer, got ${value}`);
  return value;
}
