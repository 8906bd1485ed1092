import { Counter, Gauge, type Registry } from "prom-client";

/** What the KV-event feed reports, for the workers' precise index and their event streams. */
export interface KvEventGauges {
  /** Engine blocks held in the precise index per worker, and whether its stream is live. */
  workers(): Iterable<{ id: string; blocks: number; live: boolean }>;
  /** Tokens held by the tokenizer cache. */
  tokenizerCacheTokens(): number;
}

/** KV-event metrics (prefix radixgate_kv_), registered only with --kv-events. */
export class KvEventMetrics {
  readonly events: Counter<"worker" | "type">;
  readonly malformed: Counter<"worker">;
  readonly replays: Counter<"worker" | "outcome">;
  readonly resets: Counter<"worker" | "reason">;
  readonly skipped: Counter<"worker" | "reason">;
  readonly refused: Counter<"worker" | "reason">;
  readonly tokenize: Counter<"outcome">;

  constructor(registry: Registry, gauges: KvEventGauges) {
    const registers = [registry];
    this.events = new Counter({
      name: "radixgate_kv_events_total",
      help: "KV-cache events applied to the precise index, by worker and type.",
      labelNames: ["worker", "type"],
      registers,
    });
    this.malformed = new Counter({
      name: "radixgate_kv_events_malformed_total",
      help: "KV-event messages that could not be decoded (counted and skipped).",
      labelNames: ["worker"],
      registers,
    });
    this.replays = new Counter({
      name: "radixgate_kv_events_replays_total",
      help: "Replay requests after a gap or a (re)connection, by outcome (complete, incomplete, unavailable, failed).",
      labelNames: ["worker", "outcome"],
      registers,
    });
    this.resets = new Counter({
      name: "radixgate_kv_events_resets_total",
      help: "Times a worker's precise index was dropped (sequence_reset: engine restart; gap: events lost; too_large: a batch refused for its size; overload: the backlog was shed).",
      labelNames: ["worker", "reason"],
      registers,
    });
    this.skipped = new Counter({
      name: "radixgate_kv_events_skipped_total",
      help: "Events not applied: orphan (parent block unknown), malformed (tokens do not fit), ignored (another medium), wrong_rank (a batch tagged with another data-parallel rank than its port's).",
      labelNames: ["worker", "reason"],
      registers,
    });
    this.refused = new Counter({
      name: "radixgate_kv_events_refused_total",
      help: "KV-event batches not applied: too_large (over --kv-events-max-message-bytes), overload (shed from a backlog the router could not apply in time).",
      labelNames: ["worker", "reason"],
      registers,
    });
    this.tokenize = new Counter({
      name: "radixgate_tokenize_total",
      help: "Tokenization for precise matching: cached, local (--tokenizer-path), called (the worker's /tokenize), timeout (routed approximately), prefix (past the budget, routed on a cached prefix: a prompt's first lines, a chat's earlier turn or system messages), unavailable.",
      labelNames: ["outcome"],
      registers,
    });
    new Gauge({
      name: "radixgate_kv_index_blocks",
      help: "Engine KV blocks held in the precise index, per worker.",
      labelNames: ["worker"],
      registers,
      collect() {
        this.reset();
        for (const w of gauges.workers()) this.set({ worker: w.id }, w.blocks);
      },
    });
    new Gauge({
      name: "radixgate_kv_events_stream_live",
      help: "1 when the worker's KV-event stream is connected and in sequence (precise routing), else 0.",
      labelNames: ["worker"],
      registers,
      collect() {
        this.reset();
        for (const w of gauges.workers()) this.set({ worker: w.id }, w.live ? 1 : 0);
      },
    });
    new Gauge({
      name: "radixgate_tokenizer_cache_tokens",
      help: "Tokens held by the tokenizer cache (bounded).",
      registers,
      collect() {
        this.set(gauges.tokenizerCacheTokens());
      },
    });
  }
}
