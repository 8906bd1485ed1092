/**
 * KV-event feed for the fleet (--kv-events): one subscriber per worker, events applied to the
 * precise index, and the tokens the hybrid index needs (the workers' /tokenize endpoints).
 *
 * A worker's endpoints come from the templates (--kv-events-endpoint-template, e.g.
 * `tcp://{host}:5557`, and --kv-events-replay-template) or from the admin API when it is added
 * (`kv_events_endpoint`, `kv_events_replay_endpoint`).
 *
 * Data-parallel engines (--kv-events-dp-size, or the dp_size an SGLang worker reports): one
 * subscription per rank, on the endpoints moved up by the rank (rank-endpoint.ts), each feeding
 * the rank's own entry of the precise index (index/rank-id.ts). The worker's stream is live when
 * every rank's is.
 *
 * Every stream shares one TurnBudget: the feed does a bounded amount of work per event-loop turn
 * (issue 20). Each rank's batches wait in an EventApplier bounded by --kv-index-max-blocks; a
 * stream that fills it (faster than the router applies) is shed: its backlog is dropped, its
 * precise state with it, and the worker routes approximately while it rebuilds.
 */
import type { Registry } from "prom-client";
import type { KvEvent } from "../index/block-events.js";
import type { TokenSource } from "../index/hybrid-index.js";
import type { PreciseIndex } from "../index/precise-index.js";
import { rankIndexId } from "../index/rank-id.js";
import type { TokenizeInput } from "../index/tokenize-input.js";
import type { Logger } from "../logger.js";
import type { WorkerRegistry } from "../workers/registry.js";
import type { Worker } from "../workers/worker.js";
import { EventApplier } from "./event-applier.js";
import type { LocalTokenizer } from "./local-tokenizer.js";
import { KvEventMetrics } from "./metrics.js";
import { MAX_DP_RANKS, rankEndpoint } from "./rank-endpoint.js";
import { KvEventSubscriber } from "./subscriber.js";
import { TokenizerClient } from "./tokenizer-client.js";
import { TurnBudget } from "./turn-budget.js";

export interface KvEventsSettings {
  endpointTemplate: string;
  /** "" = the engines have no replay endpoint. */
  replayTemplate: string;
  replayTimeoutMs: number;
  rebuildMs: number;
  /** Largest batch applied (--kv-events-max-message-bytes); bigger ones are refused and counted. */
  maxMessageBytes: number;
  /** Most blocks waiting to be applied per rank before its stream is shed (--kv-index-max-blocks). */
  maxPendingBlocks: number;
  tokenizeRequestTimeoutMs: number;
  tokenizerCacheTokens: number;
  /** Data-parallel ranks per engine (--kv-events-dp-size); a worker reporting more gets more. */
  dpSize: number;
  /** Tokenizes prompt strings in this process instead of calling the workers (--tokenizer-path). */
  localTokenizer?: LocalTokenizer | undefined;
}

export interface KvEndpoints {
  endpoint: string;
  replayEndpoint?: string | undefined;
}

const RECONNECT_MIN_MS = 100;
const RECONNECT_MAX_MS = 10_000;
/** Event-feed work per event-loop turn, all streams together, before sockets and timers get a turn. */
const TURN_BUDGET_MS = 4;
/** Tokens one /tokenize answer may hold. */
const MAX_TOKENS = 1 << 20;

export class KvEventsManager implements TokenSource {
  /** Per worker: one subscriber per data-parallel rank (index = rank), and the rank-0 endpoints. */
  private readonly subscribers = new Map<
    string,
    { ranks: KvEventSubscriber[]; endpoints: KvEndpoints }
  >();
  /** Per rank's index id: its batches waiting to be applied. */
  private readonly appliers = new Map<string, EventApplier>();
  private readonly budget = new TurnBudget(TURN_BUDGET_MS);
  private readonly tokenizer: TokenizerClient;
  readonly metrics: KvEventMetrics;
  private closed = false;

  constructor(
    private readonly settings: KvEventsSettings,
    private readonly precise: PreciseIndex,
    private readonly registry: WorkerRegistry,
    promRegistry: Registry,
    private readonly logger: Logger,
  ) {
    this.tokenizer = new TokenizerClient({
      requestTimeoutMs: settings.tokenizeRequestTimeoutMs,
      maxCachedTokens: settings.tokenizerCacheTokens,
      maxTokens: MAX_TOKENS,
      local: settings.localTokenizer,
    });
    this.metrics = new KvEventMetrics(promRegistry, {
      workers: () =>
        [...this.subscribers].flatMap(([id, { ranks }]) =>
          ranks.map((subscriber, rank) => {
            const rankId = rankIndexId(id, rank);
            return { id: rankId, blocks: precise.blockCount(rankId), live: subscriber.live };
          }),
        ),
      tokenizerCacheTokens: () => this.tokenizer.size,
    });
  }

  /**
   * Subscribes to the registry's workers: those there now, and each one added later as it is
   * added. Called by whoever builds the index stack, after the index follows the registry
   * (index/follow-workers.ts), so that the precise index already knows a worker when its events come.
   */
  followRegistry(): void {
    this.registry.onChange((event, worker) => {
      if (event === "added") this.attachFromTemplate(worker);
      else this.detach(worker.id);
    });
    for (const worker of this.registry.list()) this.attachFromTemplate(worker);
  }

  /** Endpoints given for one worker (admin API), replacing the template's. */
  configure(worker: Worker, endpoints: KvEndpoints): void {
    this.attach(worker, endpoints);
  }

  endpointsOf(workerId: string): KvEndpoints | undefined {
    return this.subscribers.get(workerId)?.endpoints;
  }

  /** The worker's stream state: its least ready rank's. */
  stateOf(workerId: string): string | undefined {
    const states = this.rankStatesOf(workerId);
    if (states === undefined) return undefined;
    return STATE_ORDER.find((state) => states.includes(state)) ?? states[0];
  }

  /** Each rank's stream state, rank 0 first. */
  rankStatesOf(workerId: string): string[] | undefined {
    return this.subscribers.get(workerId)?.ranks.map((s) => s.state);
  }

  /** Live when every rank's stream is: a rank's missing events would send requests astray. */
  isLive(workerId: string): boolean {
    const ranks = this.subscribers.get(workerId)?.ranks;
    return ranks?.every((s) => s.live) ?? false;
  }

  /** Data-parallel ranks followed for the worker (1 when it has none or no subscription). */
  ranksOf(workerId: string): number {
    return this.subscribers.get(workerId)?.ranks.length ?? 1;
  }

  /**
   * How busy one rank of the worker is: the requests waiting in its queue as the engine last
   * reported them (0 when it reports no queue per rank, or not lately) plus this router's requests
   * in flight there. The router's own requests still queued count twice, on every rank alike: a
   * rank other clients filled weighs more than one this router keeps busy.
   */
  rankLoad(workerId: string, rank: number): number {
    return this.registry.get(workerId)?.rankLoad(rank) ?? 0;
  }

  /**
   * The engine said how many data-parallel ranks it runs (SGLang /get_server_info): follow them
   * all when that is more than followed now.
   */
  learnRanks(worker: Worker): void {
    this.sizeRankIndexes(worker);
    const entry = this.subscribers.get(worker.id);
    const said = worker.signals.dpSize;
    if (entry === undefined || said === undefined) return;
    if (Math.min(said, MAX_DP_RANKS) <= entry.ranks.length) return;
    this.logger.info(
      { worker: worker.id, dp_size: said },
      "kv events: data-parallel ranks learned",
    );
    this.attach(worker, entry.endpoints);
  }

  /**
   * Each rank's index holds no more blocks than that rank's KV cache, once the engine said its
   * capacity (per rank in its /metrics, else an equal share of the worker's) and its block size.
   */
  private sizeRankIndexes(worker: Worker): void {
    const ranks = this.ranksOf(worker.id);
    for (let rank = 0; rank < ranks; rank++) {
      const rankId = rankIndexId(worker.id, rank);
      const tokens = worker.signals.rankCapacity(rank, ranks);
      const blockSize = this.precise.blockSizeOf(rankId) ?? worker.signals.blockSizeTokens;
      const blocks =
        tokens === undefined || blockSize === undefined ? undefined : tokens / blockSize;
      this.precise.setBlockLimit(rankId, blocks);
    }
  }

  cached(model: string | undefined, input: TokenizeInput): readonly number[] | undefined {
    const known = this.tokenizer.known(model, input);
    if (known === undefined) return undefined;
    this.metrics.tokenize.inc({ outcome: known.computed ? "local" : "cached" });
    return known.tokens;
  }

  /** The longest cached prefix of the input (counted by the hybrid index when it is used). */
  cachedPrefix(
    model: string | undefined,
    input: TokenizeInput,
  ): { tokens: readonly number[]; fraction: number } | undefined {
    return this.tokenizer.knownPrefix(model, input);
  }

  tokenize(
    workerIds: readonly string[],
    model: string | undefined,
    input: TokenizeInput,
  ): Promise<readonly number[] | undefined> {
    const worker = workerIds.map((id) => this.registry.get(id)).find((w) => w !== undefined);
    if (worker === undefined) return Promise.resolve(undefined);
    this.metrics.tokenize.inc({ outcome: "called" });
    return this.tokenizer.tokenize(worker, model, input);
  }

  close(): void {
    this.closed = true;
    for (const id of [...this.subscribers.keys()]) this.detach(id);
  }

  private attachFromTemplate(worker: Worker): void {
    const template = this.settings.endpointTemplate;
    if (template === "") return;
    const host = hostOf(worker.url);
    const replay = this.settings.replayTemplate;
    this.attach(worker, {
      endpoint: template.replaceAll("{host}", host),
      replayEndpoint: replay === "" ? undefined : replay.replaceAll("{host}", host),
    });
  }

  private attach(worker: Worker, endpoints: KvEndpoints): void {
    if (this.closed) return;
    this.detach(worker.id);
    const wanted = Math.min(
      MAX_DP_RANKS,
      Math.max(this.settings.dpSize, worker.signals.dpSize ?? 1),
    );
    const ranks: KvEventSubscriber[] = [];
    for (let rank = 0; rank < wanted; rank++) {
      const endpoint = rankEndpoint(endpoints.endpoint, rank);
      const replay =
        endpoints.replayEndpoint === undefined
          ? undefined
          : rankEndpoint(endpoints.replayEndpoint, rank);
      if (endpoint === undefined || (endpoints.replayEndpoint !== undefined && !replay)) {
        this.logger.warn(
          { worker: worker.id, endpoint: endpoints.endpoint, ranks: wanted },
          "kv events: only tcp:// endpoints have a port per data-parallel rank; following rank 0 only",
        );
        break;
      }
      ranks.push(this.subscribe(worker.id, rank, { endpoint, replayEndpoint: replay }));
    }
    this.subscribers.set(worker.id, { ranks, endpoints });
    for (const subscriber of ranks) subscriber.start();
    this.logger.info(
      {
        worker: worker.id,
        endpoint: endpoints.endpoint,
        replay: endpoints.replayEndpoint ?? null,
        ranks: ranks.length,
      },
      "kv events: subscribed",
    );
  }

  /** One rank's subscriber, feeding that rank's entry of the precise index. */
  private subscribe(workerId: string, rank: number, endpoints: KvEndpoints): KvEventSubscriber {
    const id = rankIndexId(workerId, rank);
    const m = this.metrics;
    this.precise.addWorker(id);
    const counts = new Map<string, number>();
    const applier = new EventApplier({
      budget: this.budget,
      maxPendingBlocks: this.settings.maxPendingBlocks,
      apply: (event, first) => this.applyEvent(id, event, first, counts),
      sliceDone: () => this.count(id, counts),
    });
    this.appliers.get(id)?.drop();
    this.appliers.set(id, applier);
    const subscriber: KvEventSubscriber = new KvEventSubscriber({
      endpoint: endpoints.endpoint,
      replayEndpoint: endpoints.replayEndpoint,
      replayTimeoutMs: this.settings.replayTimeoutMs,
      rebuildMs: this.settings.rebuildMs,
      reconnectMinMs: RECONNECT_MIN_MS,
      reconnectMaxMs: RECONNECT_MAX_MS,
      maxMessageBytes: this.settings.maxMessageBytes,
      budget: this.budget,
      caughtUp: () => applier.caughtUp(),
      onBatch: (batch) => {
        // vLLM tags each batch with its rank; one from another rank means misrouted endpoints.
        if (batch.dataParallelRank !== null && batch.dataParallelRank !== rank) {
          m.skipped.inc({ worker: id, reason: "wrong_rank" }, batch.events.length);
          return;
        }
        if (!applier.push(batch.events)) this.shed(id, subscriber, applier);
      },
      onReset: (reason) => {
        m.resets.inc({ worker: id, reason });
        applier.drop();
        this.precise.clear(id);
        this.logger.warn({ worker: id, reason }, "kv events: precise index dropped");
      },
      onRefused: (reason, batches, bytes) => {
        m.refused.inc({ worker: id, reason }, batches);
        // An overload drop comes during a shed hold, which onReset("overload") logged once.
        if (reason === "too_large") {
          this.logger.warn(
            { worker: id, bytes, limit: this.settings.maxMessageBytes },
            "kv events: batch over --kv-events-max-message-bytes refused",
          );
        }
      },
      onMalformed: (error) => {
        m.malformed.inc({ worker: id });
        this.logger.debug(
          { worker: id, err: error.message },
          "kv events: malformed message skipped",
        );
      },
      onReplay: (outcome) => m.replays.inc({ worker: id, outcome }),
    });
    return subscriber;
  }

  /** Ends the worker's subscriptions and forgets what they brought (rank 0's entry stays registered). */
  private detach(workerId: string): void {
    const entry = this.subscribers.get(workerId);
    if (entry === undefined) return;
    this.subscribers.delete(workerId);
    entry.ranks.forEach((subscriber, rank) => {
      subscriber.close();
      const id = rankIndexId(workerId, rank);
      this.appliers.get(id)?.drop();
      this.appliers.delete(id);
      if (rank === 0) this.precise.clear(workerId);
      else this.precise.removeWorker(rankIndexId(workerId, rank));
    });
  }

  /**
   * A rank's backlog is full: its engine publishes faster than the router applies. The backlog
   * and the state built on the stream are dropped (what was queued is lost), and the worker routes
   * approximately for --kv-events-rebuild-secs while new events rebuild its index.
   */
  private shed(id: string, subscriber: KvEventSubscriber, applier: EventApplier): void {
    const wasLive = subscriber.live;
    const dropped = applier.drop() + 1; // the batch that did not fit
    this.metrics.refused.inc({ worker: id, reason: "overload" }, dropped);
    this.metrics.resets.inc({ worker: id, reason: "overload" });
    this.precise.clear(id);
    subscriber.rebuild();
    // Once per episode: a flood sheds again and again while it lasts.
    if (wasLive) {
      this.logger.warn(
        { worker: id, dropped_batches: dropped },
        "kv events: publisher faster than the router applies; backlog shed, routing approximately",
      );
    }
  }

  private applyEvent(
    id: string,
    event: KvEvent,
    first: boolean,
    counts: Map<string, number>,
  ): void {
    const result = this.precise.apply(id, event);
    // An event applied in pieces counts once (its first piece decides an orphan too).
    if (!first) return;
    const key = result === "applied" ? event.type : `!${result}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }

  /** Counted per slice, not per event: a slice can hold a thousand events. */
  private count(id: string, counts: Map<string, number>): void {
    for (const [key, n] of counts) {
      if (key.startsWith("!")) this.metrics.skipped.inc({ worker: id, reason: key.slice(1) }, n);
      else this.metrics.events.inc({ worker: id, type: key }, n);
    }
    counts.clear();
  }
}

/** Least ready first: the state a worker shows is its least ready rank's. */
const STATE_ORDER = ["disconnected", "syncing", "rebuilding", "live"];

function hostOf(url: string): string {
  return new URL(url).hostname;
}
