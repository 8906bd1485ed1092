import { Counter, collectDefaultMetrics, Gauge, Registry } from "prom-client";
import { HistogramAlias } from "./metric-alias.js";
import { TalliedCounter, TalliedHistogram } from "./metric-tally.js";
import type { WorkerRegistry } from "./workers/registry.js";

/** Between two samples of the event-loop delay (radixgate_nodejs_eventloop_lag_*). */
const EVENT_LOOP_SAMPLE_MS = 100;
const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];
const RATE_BUCKETS = [0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1];
const BREAKER_VALUE = { closed: 0, half_open: 1, open: 2 } as const;
/** HELP text of a name kept one release for dashboards that still read it (issue 19). */
const deprecatedAlias = (name: string) =>
  `Deprecated alias of ${name} (same values); removed in the next release.`;

/**
 * The router's Prometheus metrics, prefix radixgate_. Per-worker gauges are read from the
 * registry at scrape time, so the request path only touches counters and histograms, and a
 * removed worker's series disappear with it.
 */
export class Metrics {
  readonly registry = new Registry();
  // Updated on every request: tallied (metric-tally.ts), read through prom-client.
  readonly requests: TalliedCounter<"endpoint" | "status">;
  readonly requestDuration: TalliedHistogram<"endpoint">;
  readonly timeToFirstByte: TalliedHistogram<"endpoint">;
  readonly decisions: TalliedCounter<"policy" | "branch">;
  /** radixgate_match_ratio (radixgate_match_rate, its deprecated alias, reads it at scrape). */
  readonly matchRate: TalliedHistogram;
  readonly evictedChars: Counter<never>;
  readonly retries: Counter<"endpoint">;
  readonly upstreamErrors: Counter<"worker" | "kind">;
  readonly queueRejections: Counter<"reason">;
  readonly enginePromptTokens: TalliedCounter<"worker">;
  readonly engineCachedTokens: TalliedCounter<"worker">;
  readonly feedbackCorrections: Counter<"worker">;

  constructor(workers: WorkerRegistry) {
    const registers = [this.registry];
    // Node's default metric names already start with process_/nodejs_: the prefix is ours alone.
    // prom-client samples the event-loop delay every 10 ms by default: 100 wakeups a second, about
    // 10 ms of CPU a second on an idle router (measured with nothing in flight). A tenth of that still catches
    // any stall long enough to matter.
    collectDefaultMetrics({
      register: this.registry,
      prefix: "radixgate_",
      eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS,
    });
    this.requests = new TalliedCounter({
      name: "radixgate_requests_total",
      help: "Requests answered, by endpoint and HTTP status.",
      labelNames: ["endpoint", "status"],
      registers,
    });
    this.requestDuration = new TalliedHistogram({
      name: "radixgate_request_duration_seconds",
      help: "Time from request arrival to the end of the response.",
      labelNames: ["endpoint"],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.timeToFirstByte = new TalliedHistogram({
      name: "radixgate_time_to_first_byte_seconds",
      help: "Time from request arrival to the first response body byte sent to the client.",
      labelNames: ["endpoint"],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.decisions = new TalliedCounter({
      name: "radixgate_routing_decisions_total",
      help: "Routing decisions by policy and branch (cache_hit, cache_miss, imbalanced, ...).",
      labelNames: ["policy", "branch"],
      registers,
    });
    // Prometheus naming: a 0..1 fraction is a _ratio (the old name stays one release).
    const matchRatio = new TalliedHistogram({
      name: "radixgate_match_ratio",
      help: "cache_aware: the chosen worker's prefix match, as a ratio 0..1 of matched to prompt characters.",
      buckets: RATE_BUCKETS,
      registers,
    });
    // The old name shows the same samples at each scrape; a request observes one histogram.
    new HistogramAlias(
      matchRatio.histogram,
      "radixgate_match_ratio",
      "radixgate_match_rate",
      deprecatedAlias("radixgate_match_ratio"),
      registers,
    );
    this.matchRate = matchRatio;
    this.evictedChars = new Counter({
      name: "radixgate_tree_evicted_characters_total",
      help: "Characters evicted from the prefix trees (LRU).",
      registers,
    });
    this.retries = new Counter({
      name: "radixgate_retries_total",
      help: "Requests sent again to another worker after a retryable failure.",
      labelNames: ["endpoint"],
      registers,
    });
    this.upstreamErrors = new Counter({
      name: "radixgate_upstream_errors_total",
      help: "Failed upstream attempts by worker id and kind (connect, timeout, status_5xx, stream, ...).",
      labelNames: ["worker", "kind"],
      registers,
    });
    this.queueRejections = new Counter({
      name: "radixgate_queue_rejections_total",
      help: "Requests refused by the admission queue (full, timeout).",
      labelNames: ["reason"],
      registers,
    });
    // Engine-reported usage (proxy/usage-tap.ts): cached / prompt is the fleet's real hit rate.
    this.enginePromptTokens = new TalliedCounter({
      name: "radixgate_engine_prompt_tokens_total",
      help: "Prompt tokens the workers' engines reported in their responses' usage.",
      labelNames: ["worker"],
      registers,
    });
    this.engineCachedTokens = new TalliedCounter({
      name: "radixgate_engine_cached_tokens_total",
      help: "Prompt tokens the workers' engines reported as found in their prefix cache.",
      labelNames: ["worker"],
      registers,
    });
    this.feedbackCorrections = new Counter({
      name: "radixgate_feedback_corrections_total",
      help: "Times an engine reported clearly fewer cached tokens than the index claimed, so the index was trimmed.",
      labelNames: ["worker"],
      registers,
    });
    // One gauge series per registered worker, read at scrape time; a worker whose value is
    // undefined (an engine signal not known, or no longer fresh) has no series.
    const perWorker = (
      name: string,
      help: string,
      read: (w: ReturnType<WorkerRegistry["list"]>[number]) => number | undefined,
    ) =>
      new Gauge({
        name,
        help,
        labelNames: ["worker"],
        registers,
        collect() {
          this.reset();
          for (const worker of workers.list()) {
            const value = read(worker);
            if (value !== undefined) this.set({ worker: worker.id }, value);
          }
        },
      });
    perWorker("radixgate_worker_in_flight", "Requests in flight per worker.", (w) => w.inFlight);
    perWorker(
      "radixgate_worker_pending_prefill_chars",
      "Uncached prompt characters of the worker's in-flight requests still waiting for a first byte (prefix_cost's queue).",
      (w) => w.pendingPrefillChars,
    );
    perWorker("radixgate_worker_healthy", "1 when the worker passes health checks.", (w) =>
      w.healthy ? 1 : 0,
    );
    perWorker(
      "radixgate_worker_circuit_state",
      "Circuit breaker state: 0 closed, 1 half-open, 2 open.",
      (w) => BREAKER_VALUE[w.breaker.state],
    );
    perWorker("radixgate_tree_characters", "Characters held in the worker's prefix tree.", (w) =>
      w.indexedChars(),
    );
    // What the engines report (workers/introspection.ts): a worker has no series while unknown,
    // and queue and KV usage only while fresh (read within 3 poll intervals).
    perWorker(
      "radixgate_worker_kv_capacity_tokens",
      "KV cache capacity in tokens, as the worker's engine last reported it.",
      (w) => w.signals.lastCapacity,
    );
    perWorker(
      "radixgate_worker_chars_per_token",
      "Characters of routing text per prompt token, learned from the engine's usage (4 until then).",
      (w) => w.charsPerToken,
    );
    perWorker(
      "radixgate_tree_budget_characters",
      "Budget of the worker's prefix tree (--max-tree-size, or learned: capacity x chars per token x factor).",
      (w) => w.treeBudget,
    );
    perWorker(
      "radixgate_worker_engine_queue",
      "Requests waiting in the engine's queue (engine-reported, while fresh).",
      (w) => w.signals.load()?.queued,
    );
    perWorker(
      "radixgate_worker_engine_running",
      "Requests in the engine's running batch (engine-reported, while fresh).",
      (w) => w.signals.load()?.running,
    );
    perWorker(
      "radixgate_worker_kv_usage_ratio",
      "Share of the engine's KV cache in use, as a ratio 0..1 (engine-reported, while fresh).",
      (w) => w.signals.load()?.kvUsage,
    );
    perWorker(
      "radixgate_worker_kv_usage",
      deprecatedAlias("radixgate_worker_kv_usage_ratio"),
      (w) => w.signals.load()?.kvUsage,
    );
    perWorker(
      "radixgate_worker_signal_age_seconds",
      "Seconds since the worker's engine last answered an introspection read.",
      (w) => w.signals.ageSecs(),
    );
    // A counter read at scrape time from the worker's own count: monotonic for as long as the
    // worker is registered, and its series leaves with it (like the gauges above).
    new Counter({
      name: "radixgate_worker_requests_served_total",
      help: "Requests completed by the worker.",
      labelNames: ["worker"],
      registers,
      collect() {
        this.reset();
        for (const worker of workers.list()) this.inc({ worker: worker.id }, worker.served);
      },
    });
    // Every per-worker series is labelled with the worker id (as the x-radixgate-worker header
    // and the logs); this info metric joins an id to its URL.
    new Gauge({
      name: "radixgate_worker_info",
      help: "Always 1; joins the worker label (the worker id) to the worker URL.",
      labelNames: ["worker", "url"],
      registers,
      collect() {
        this.reset();
        for (const worker of workers.list()) this.set({ worker: worker.id, url: worker.url }, 1);
      },
    });
    new Gauge({
      name: "radixgate_workers",
      help: "Registered workers.",
      registers,
      collect() {
        this.set(workers.size);
      },
    });
  }
}
