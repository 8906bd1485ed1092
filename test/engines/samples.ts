/**
 * Engine output in the engines' own formats (names, labels, value syntax), for parser tests.
 * vLLM: PrometheusStatLogger (vllm/v1/metrics/loggers.py) labels every series model_name + engine,
 * and log_metrics_info("cache_config", ...) writes vllm:cache_config_info with the CacheConfig
 * fields as labels. SGLang: SchedulerMetricsCollector (sglang/srt/metrics/collector.py).
 */

/** vLLM V1 with two data-parallel engines, with histograms around the gauges it reads. */
export const VLLM_DP2_METRICS = `# HELP vllm:num_requests_running Requests in the running batch.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 3.0
vllm:num_requests_running{engine="1",model_name="meta-llama/Llama-3.1-8B-Instruct"} 2.0
# HELP vllm:num_requests_waiting Requests waiting.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 4.0
vllm:num_requests_waiting{engine="1",model_name="meta-llama/Llama-3.1-8B-Instruct"} 1.0
# HELP vllm:kv_cache_usage_perc KV-cache usage (1 = full).
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.5
vllm:kv_cache_usage_perc{engine="1",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.25
# HELP vllm:time_to_first_token_seconds TTFT.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.001",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="meta-llama/Llama-3.1-8B-Instruct"} 7.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 7.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 1.25
# HELP vllm:prompt_tokens_total Prefill tokens.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 12345.0
# HELP vllm:cache_config_info CacheConfig.
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",cache_dtype="auto",calculate_kv_scales="False",cpu_offload_gb="0",enable_prefix_caching="True",engine="0",gpu_memory_utilization="0.9",is_attention_free="False",num_cpu_blocks="None",num_gpu_blocks="27197",num_gpu_blocks_override="None",prefix_caching_hash_algo="sha256",sliding_window="None",swap_space="4",swap_space_bytes="4294967296"} 1.0
vllm:cache_config_info{block_size="16",cache_dtype="auto",calculate_kv_scales="False",cpu_offload_gb="0",enable_prefix_caching="True",engine="1",gpu_memory_utilization="0.9",is_attention_free="False",num_cpu_blocks="None",num_gpu_blocks="27000",num_gpu_blocks_override="None",prefix_caching_hash_algo="sha256",sliding_window="None",swap_space="4",swap_space_bytes="4294967296"} 1.0
`;

/** vLLM before 0.9 (and the V0 engine): gpu_cache_usage_perc, no engine label. */
export const VLLM_OLD_METRICS = `# HELP vllm:num_requests_running Requests running.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="facebook/opt-125m"} 1.0
# HELP vllm:num_requests_waiting Requests waiting.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="facebook/opt-125m"} 0.0
# HELP vllm:gpu_cache_usage_perc GPU KV-cache usage.
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name="facebook/opt-125m"} 0.125
# HELP vllm:cache_config_info CacheConfig.
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",cache_dtype="auto",enable_prefix_caching="False",gpu_memory_utilization="0.9",num_cpu_blocks="2048",num_gpu_blocks="None",num_gpu_blocks_override="None",sliding_window="None",swap_space_bytes="4294967296"} 1.0
`;

/** SGLang with --enable-metrics, two DP ranks, recent label set. */
export const SGLANG_METRICS = `# HELP sglang:num_running_reqs Running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{dp_rank="0",engine_type="unified",model_name="qwen/qwen2.5-7b-instruct",pp_rank="0",tp_rank="0"} 8.0
sglang:num_running_reqs{dp_rank="1",engine_type="unified",model_name="qwen/qwen2.5-7b-instruct",pp_rank="0",tp_rank="0"} 6.0
# HELP sglang:num_queue_reqs Queued requests.
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{dp_rank="0",engine_type="unified",model_name="qwen/qwen2.5-7b-instruct",pp_rank="0",tp_rank="0"} 2.0
sglang:num_queue_reqs{dp_rank="1",engine_type="unified",model_name="qwen/qwen2.5-7b-instruct",pp_rank="0",tp_rank="0"} 0.0
# HELP sglang:token_usage Token usage.
# TYPE sglang:token_usage gauge
sglang:token_usage{dp_rank="0",engine_type="unified",model_name="qwen/qwen2.5-7b-instruct",pp_rank="0",tp_rank="0"} 0.3
sglang:token_usage{dp_rank="1",engine_type="unified",model_name="qwen/qwen2.5-7b-instruct",pp_rank="0",tp_rank="0"} 0.1
# HELP sglang:cache_hit_rate Prefix cache hit rate.
# TYPE sglang:cache_hit_rate gauge
sglang:cache_hit_rate{dp_rank="0",engine_type="unified",model_name="qwen/qwen2.5-7b-instruct",pp_rank="0",tp_rank="0"} 0.75
sglang:cache_hit_rate{dp_rank="1",engine_type="unified",model_name="qwen/qwen2.5-7b-instruct",pp_rank="0",tp_rank="0"} 0.25
# HELP sglang:max_total_num_tokens KV pool size.
# TYPE sglang:max_total_num_tokens gauge
sglang:max_total_num_tokens{dp_rank="0",engine_type="unified",model_name="qwen/qwen2.5-7b-instruct",pp_rank="0",tp_rank="0"} 500000.0
sglang:max_total_num_tokens{dp_rank="1",engine_type="unified",model_name="qwen/qwen2.5-7b-instruct",pp_rank="0",tp_rank="0"} 500000.0
# HELP sglang:prompt_tokens_total Prefill tokens.
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{model_name="qwen/qwen2.5-7b-instruct"} 1.0e+06
`;

/** An older SGLang: fewer labels, no max_total_num_tokens gauge. */
export const SGLANG_OLD_METRICS = `# HELP sglang:num_running_reqs Running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="meta-llama/Llama-3.1-8B-Instruct"} 1.0
# HELP sglang:num_queue_reqs Queued requests.
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="meta-llama/Llama-3.1-8B-Instruct"} 3.0
# HELP sglang:token_usage Token usage.
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.02
`;

/** SGLang /get_server_info: server args + scheduler info + internal_states + version (abridged). */
export const SGLANG_SERVER_INFO = {
  model_path: "qwen/qwen2.5-7b-instruct",
  tokenizer_path: "qwen/qwen2.5-7b-instruct",
  served_model_name: "qwen/qwen2.5-7b-instruct",
  context_length: null,
  mem_fraction_static: 0.88,
  max_running_requests: null,
  max_total_tokens: null,
  chunked_prefill_size: 8192,
  page_size: 1,
  tp_size: 1,
  dp_size: 2,
  load_balance_method: "round_robin",
  api_key: null,
  enable_metrics: true,
  status: "ready",
  max_total_num_tokens: 500000,
  max_req_input_len: 32762,
  internal_states: [{ last_gen_throughput: 0, avg_spec_accept_length: null }],
  version: "0.5.2",
};

/** vLLM /v1/models with a LoRA adapter (its parent is the base model). */
export const VLLM_MODELS_WITH_LORA = {
  object: "list",
  data: [
    {
      id: "meta-llama/Llama-3.1-8B-Instruct",
      object: "model",
      created: 1763900000,
      owned_by: "vllm",
      root: "meta-llama/Llama-3.1-8B-Instruct",
      parent: null,
      max_model_len: 131072,
      permission: [],
    },
    {
      id: "sql-lora",
      object: "model",
      created: 1763900000,
      owned_by: "vllm",
      root: "/adapters/sql-lora",
      parent: "meta-llama/Llama-3.1-8B-Instruct",
      max_model_len: null,
      permission: [],
    },
  ],
};
