import type { EngineKind, RankReading } from "../engines/engine-reading.js";

/** Queue and KV usage as the engine last reported them. */
export interface LoadSignals {
  readonly queued: number | undefined;
  readonly running: number | undefined;
  readonly kvUsage: number | undefined;
  /**
   * This router's own requests there still waiting for a first byte when the engine answered
   * (the larger count of the read's start and end: the engine's snapshot falls in between).
   * The engine's queue includes those; what it reports beyond them someone else sent.
   */
  readonly routerPending?: number | undefined;
  /**
   * The other replicas' requests there waiting for a first byte, as this router counted them when
   * the engine answered (Worker.peerPendingPrefillRequests; the larger of the read's start and
   * end). Counted in their queued prefill already, so not foreign work either.
   */
  readonly peerPending?: number | undefined;
  /**
   * The smaller count of the read's start and end: admission's live queue estimate counts from it,
   * so a read that spans a burst of dispatches errs toward a longer queue (workers/saturation.ts).
   */
  readonly routerPendingLeast?: number | undefined;
  /**
   * This router's requests in flight there (dispatched, not ended) at the read, the smaller count
   * of its start and end: admission counts what ended since from it (workers/saturation.ts).
   */
  readonly routerInFlightLeast?: number | undefined;
  /**
   * The most of this router's requests there at any moment of the read (its start, its end and
   * every dispatch between): the engine's snapshot falls within the read, so of what it holds at
   * most this many are this router's. Free slots count the others' work from it.
   */
  readonly routerInFlightMost?: number | undefined;
}

/**
 * Requests in an engine's reported queue that this router did not send (another replica's, direct
 * clients'): the queue minus the router's own requests waiting there when the engine answered
 * (`LoadSignals.routerPending`), never below 0. Worker.foreignQueuedAt (read by prefix_cost) and
 * bench:ttft's replay both count it with this.
 */
export function foreignQueued(queued: number, routerPending: number): number {
  return Math.max(0, queued - Math.max(0, routerPending));
}

/** Readings older than this many poll intervals are ignored (introspection.ts, bench:ttft). */
export const STALE_AFTER_INTERVALS = 3;

/**
 * What the router has learned about one worker from its engine (src/workers/introspection.ts
 * fills it), each part with the time it was read. A part older than `staleAfterMs` is ignored:
 * `load()` and `capacity()` answer undefined, exactly as for a worker that exposes nothing.
 */
export class EngineSignals {
  /** Which engine answered, once known. */
  engine: EngineKind | undefined;
  /** Data-parallel ranks the engine said it runs (SGLang /get_server_info dp_size), once known. */
  dpSize: number | undefined;
  /**
   * Requests the engine said it runs at once over its ranks (SGLang /get_server_info), once known.
   */
  saidMaxRunning: number | undefined;
  /**
   * Requests the operator said it runs at once (--worker-max-running, or the worker's own
   * `max_running` in POST /workers and --worker-file): wins over what the engine says.
   */
  declaredMaxRunning: number | undefined;
  /**
   * SGLang's --priority-scheduling-preemption-threshold, when /get_server_info says it: a waiting
   * request preempts a running one only when its priority is above by more than this.
   */
  preemptionThreshold: number | undefined;

  /**
   * The running cap as known without a reading (the operator's, else the engine's word):
   * admission's batch until a reading shows the engine full (workers/saturation.ts).
   */
  get maxRunning(): number | undefined {
    return this.declaredMaxRunning ?? this.saidMaxRunning;
  }
  set maxRunning(cap: number | undefined) {
    this.saidMaxRunning = cap;
  }
  /** Tokens a KV block, when the engine said (vLLM's cache_config_info block_size). */
  blockSizeTokens: number | undefined;
  /** Signals older than this are ignored (3 poll intervals; set by the poller). */
  staleAfterMs = Number.POSITIVE_INFINITY;

  private capacityTokens: number | undefined;
  private capacitySource: "get_server_info" | "metrics" | undefined;
  /** When each part was read (epoch ms, or model ms in bench:ttft); undefined = never. */
  private capacityAt: number | undefined;
  private lastLoad: LoadSignals | undefined;
  private loadAt: number | undefined;
  /** Each data-parallel rank's own series from the same read as `lastLoad` (index = rank). */
  private lastRanks: readonly RankReading[] | undefined;
  /** Last time any endpoint answered something usable (epoch ms, 0 = never). */
  private seenAt = 0;

  recordCapacity(tokens: number, source: "get_server_info" | "metrics", now: number): void {
    this.capacityTokens = tokens;
    this.capacitySource = source;
    this.capacityAt = now;
    this.seenAt = now;
  }

  /** `ranks`: each data-parallel rank's series of the same read, when the engine gave them. */
  recordLoad(load: LoadSignals, now: number, ranks?: readonly RankReading[]): void {
    this.lastLoad = load;
    this.lastRanks = ranks;
    this.loadAt = now;
    this.seenAt = now;
  }

  recordSeen(now: number): void {
    this.seenAt = now;
  }

  /** KV capacity in tokens, when fresh. */
  capacity(now = Date.now()): number | undefined {
    return this.fresh(this.capacityAt, now) ? this.capacityTokens : undefined;
  }

  /** The last capacity ever learned, fresh or not (the tree budget keeps it; see tree-budget.ts). */
  get lastCapacity(): number | undefined {
    return this.capacityTokens;
  }

  get capacityFrom(): "get_server_info" | "metrics" | undefined {
    return this.capacitySource;
  }

  /** Queue, running and KV usage, when fresh. */
  load(now = Date.now()): LoadSignals | undefined {
    return this.fresh(this.loadAt, now) ? this.lastLoad : undefined;
  }

  /** Each rank's queue, running batch, KV usage and capacity, when fresh and reported per rank. */
  ranks(now = Date.now()): readonly RankReading[] | undefined {
    return this.fresh(this.loadAt, now) ? this.lastRanks : undefined;
  }

  /** Requests waiting in one rank's queue at the last fresh read; undefined when not known. */
  rankQueued(rank: number, now = Date.now()): number | undefined {
    return this.ranks(now)?.[rank]?.queued;
  }

  /**
   * One rank's KV capacity in tokens: its own series when the metrics gave one, else an equal
   * share of the worker's (SGLang's /get_server_info gives one rank's pool, every rank the same;
   * sglang-server-info.ts); undefined when neither is known. Like `lastCapacity`, the last one
   * learned, fresh or not: a cache does not shrink when its engine stops answering.
   */
  rankCapacity(rank: number, ranks: number): number | undefined {
    const own = this.lastRanks?.[rank]?.capacityTokens;
    if (own !== undefined && own > 0) return own;
    const whole = this.capacityTokens;
    return whole === undefined || ranks < 1 ? undefined : Math.floor(whole / ranks);
  }

  /**
   * Requests in the engine's queue at its last reading that this router did not send
   * (`foreignQueued`); undefined when the reading is stale at `now` or has no queue.
   */
  foreignQueued(now: number): number | undefined {
    const load = this.load(now);
    if (load?.queued === undefined) return undefined;
    return foreignQueued(load.queued, (load.routerPending ?? 0) + (load.peerPending ?? 0));
  }

  /** Seconds since the engine last answered anything usable; undefined when it never did. */
  ageSecs(now = Date.now()): number | undefined {
    return this.seenAt === 0 ? undefined : Math.max(0, now - this.seenAt) / 1000;
  }

  private fresh(at: number | undefined, now: number): boolean {
    return at !== undefined && now - at <= this.staleAfterMs;
  }
}
