/**
 * SGLang's GET /get_model_info and /get_server_info as the simulator answers them: the model, the
 * engine's limits and the simulator's own timing.
 */
import type { PrefixKvCache } from "./kv-cache.js";
import type { ResolvedSimOptions } from "./options.js";

export const SIM_VERSION = "0.0.0-sim";

export function serverInfo(o: ResolvedSimOptions, kv: PrefixKvCache, dpSize: number, id: string) {
  return {
    model_path: o.model,
    served_model_name: o.model,
    context_length: o.maxModelLen,
    max_total_num_tokens: kv.totalBlocks * kv.blockSize,
    max_req_input_len: o.maxModelLen - 1,
    dp_size: dpSize,
    max_running_requests: o.maxRunning,
    chunked_prefill_size: o.maxBatchTokens,
    page_size: o.blockSize,
    // The priority server args as SGLang lists them (python/sglang/srt/server_args.py).
    enable_priority_scheduling: o.priorityScheduling,
    disable_priority_preemption: o.disablePriorityPreemption,
    schedule_low_priority_values_first: false,
    priority_scheduling_preemption_threshold: o.prioritySchedulingPreemptionThreshold,
    // The LoRA server args (server_args.py): --max-loaded-loras, --max-loras-per-batch.
    enable_lora: o.loraAdapters.length > 0 || o.maxLoras !== undefined || null,
    max_loaded_loras: o.maxLoadedLoras ?? null,
    max_loras_per_batch: o.maxLoras ?? 8,
    // SGLang lists every server argument, its keys included (dataclasses.asdict(server_args)).
    api_key: o.apiKey ?? null,
    admin_api_key: null,
    ssl_keyfile_password: null,
    version: SIM_VERSION,
    simulator: {
      id: id,
      flavor: o.flavor,
      timeScale: o.timeScale,
      prefillTokensPerSec: o.prefillTokensPerSec,
      stepFloorMs: o.stepFloorMs,
      decodePerSeqMs: o.decodePerSeqMs,
      kvReadMsPer1kTokens: o.kvReadMsPer1kTokens,
      defaultMaxTokens: o.defaultMaxTokens,
    },
  };
}

export function modelInfo(o: ResolvedSimOptions) {
  return { model_path: o.model, tokenizer_path: o.model, is_generation: true };
}
