/**
 * GET /metrics in Prometheus text format, under the metric names and labels of the engine being
 * mimicked: vLLM (vllm:num_requests_running, vllm:kv_cache_usage_perc, ..., labels model_name and
 * engine, plus the info gauge vllm:cache_config_info whose labels carry block_size and
 * num_gpu_blocks: PrometheusStatLogger in vllm/v1/metrics/loggers.py) or SGLang
 * (sglang:num_running_reqs, sglang:num_queue_reqs, sglang:token_usage, sglang:cache_hit_rate,
 * sglang:max_total_num_tokens: SchedulerMetricsCollector in sglang/srt/metrics/collector.py).
 */
import type { SimFlavor } from "./options.js";

export interface MetricsSnapshot {
  model: string;
  running: number;
  waiting: number;
  /** Fraction of KV blocks held by running requests, 0..1. */
  kvUsage: number;
  /** Blocks held by running requests, in tokens. */
  kvUsedTokens: number;
  /** Prompt tokens looked up in the prefix cache at admission. */
  promptTokens: number;
  /** Of those, tokens found cached. */
  cachedTokens: number;
  generationTokens: number;
  completedRequests: number;
  /** KV blocks in the cache and tokens per block (its capacity). */
  kvBlocks: number;
  blockSize: number;
}

type Sample = [name: string, type: "gauge" | "counter", help: string, value: number];

export const METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

/**
 * Written here rather than with prom-client (which the router itself uses) on purpose: the point
 * of the simulator is to expose the text the engines expose, and both are Python
 * prometheus_client servers that print every sample as a float ("1.0", "400000.0"); prom-client
 * prints "1". The router's parser (src/engines/) is tested against this float form, the one it
 * meets in production. Escaping follows the text format's rules (escapeLabel below).
 */
export function renderMetrics(
  flavor: SimFlavor,
  m: MetricsSnapshot,
  /**
   * With data parallelism: one snapshot per rank, each its own series (vLLM label `engine`,
   * SGLang label `dp_rank`).
   */
  ranks: readonly MetricsSnapshot[] = [m],
): string {
  if (ranks.length <= 1) return renderFamilies([familiesOf(flavor, m, 0)]);
  return renderFamilies(ranks.map((rank, i) => familiesOf(flavor, rank, i, i)));
}

/** One metric family of one rank: its HELP/TYPE lines and its sample line. */
interface FamilyText {
  readonly header: string;
  readonly sample: string;
}

/**
 * Every family once, its HELP and TYPE first, then each rank's series of it: the exposition
 * format wants a family's samples together, as prometheus_client prints them.
 */
function renderFamilies(perRank: readonly (readonly FamilyText[])[]): string {
  let out = "";
  const first = perRank[0] ?? [];
  for (let f = 0; f < first.length; f++) {
    out += first[f]!.header;
    for (const families of perRank) out += families[f]!.sample;
  }
  return out;
}

function familiesOf(
  flavor: SimFlavor,
  m: MetricsSnapshot,
  engine: number,
  dpRank?: number,
): FamilyText[] {
  const hitRate = m.promptTokens > 0 ? m.cachedTokens / m.promptTokens : 0;
  const samples: Sample[] =
    flavor === "vllm"
      ? [
          [
            "vllm:num_requests_running",
            "gauge",
            "Number of requests in model execution batches.",
            m.running,
          ],
          [
            "vllm:num_requests_waiting",
            "gauge",
            "Number of requests waiting to be processed.",
            m.waiting,
          ],
          [
            "vllm:kv_cache_usage_perc",
            "gauge",
            "KV-cache usage. 1 means 100 percent usage.",
            m.kvUsage,
          ],
          [
            "vllm:prefix_cache_queries_total",
            "counter",
            "Prefix cache queries, in terms of number of queried tokens.",
            m.promptTokens,
          ],
          [
            "vllm:prefix_cache_hits_total",
            "counter",
            "Prefix cache hits, in terms of number of cached tokens.",
            m.cachedTokens,
          ],
          [
            "vllm:prompt_tokens_total",
            "counter",
            "Number of prefill tokens processed.",
            m.promptTokens,
          ],
          [
            "vllm:generation_tokens_total",
            "counter",
            "Number of generation tokens processed.",
            m.generationTokens,
          ],
          [
            "vllm:request_success_total",
            "counter",
            "Count of successfully processed requests.",
            m.completedRequests,
          ],
        ]
      : [
          ["sglang:num_running_reqs", "gauge", "The number of running requests.", m.running],
          [
            "sglang:num_queue_reqs",
            "gauge",
            "The number of requests in the waiting queue.",
            m.waiting,
          ],
          ["sglang:token_usage", "gauge", "The token usage.", m.kvUsage],
          ["sglang:num_used_tokens", "gauge", "The number of used tokens.", m.kvUsedTokens],
          ["sglang:cache_hit_rate", "gauge", "The prefix cache hit rate.", hitRate],
          [
            "sglang:max_total_num_tokens",
            "gauge",
            "Maximum total number of tokens in the KV cache pool.",
            m.kvBlocks * m.blockSize,
          ],
          [
            "sglang:prompt_tokens_total",
            "counter",
            "Number of prefill tokens processed.",
            m.promptTokens,
          ],
          [
            "sglang:generation_tokens_total",
            "counter",
            "Number of generation tokens processed.",
            m.generationTokens,
          ],
          [
            "sglang:num_requests_total",
            "counter",
            "Number of requests processed.",
            m.completedRequests,
          ],
        ];
  // vLLM labels every series with the served model and the engine index (one per DP rank);
  // SGLang's schedulers add `dp_rank` when dp_size > 1 (init_metrics in
  // python/sglang/srt/managers/scheduler_metrics_mixin.py).
  const model = `model_name="${escapeLabel(m.model)}"`;
  const label =
    flavor === "vllm"
      ? `{${model},engine="${engine}"}`
      : `{${model}${dpRank === undefined ? "" : `,dp_rank="${dpRank}"`}}`;
  const out: FamilyText[] = samples.map(([name, type, text, value]) => ({
    header: `# HELP ${name} ${text}\n# TYPE ${name} ${type}\n`,
    sample: `${name}${label} ${formatValue(value)}\n`,
  }));
  if (flavor === "vllm") {
    // An info gauge: value 1, the CacheConfig fields as string labels ("None" when unset).
    const name = "vllm:cache_config_info";
    out.push({
      header: `# HELP ${name} Information of the LLMEngine CacheConfig\n# TYPE ${name} gauge\n`,
      sample:
        `${name}{block_size="${m.blockSize}",cache_dtype="auto",enable_prefix_caching="True",` +
        `engine="${engine}",gpu_memory_utilization="0.9",num_cpu_blocks="None",` +
        `num_gpu_blocks="${m.kvBlocks}",num_gpu_blocks_override="None"} 1.0\n`,
    });
  }
  return out;
}

function escapeLabel(value: string): string {
  return value.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"');
}

function formatValue(value: number): string {
  return Number.isInteger(value) ? `${value}.0` : String(value);
}
