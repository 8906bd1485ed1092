/**
 * KV-event intake for the fleet (--kv-events): one subscriber per worker, events applied to the
 * precise index, and the tokens the hybrid index needs (the workers' /tokenize endpoints).
 *
 * A worker's endpoints come from the templates (--kv-events-endpoint-template, e.g.
 * `tcp://{host}:5557`, and --kv-events-replay-template) or from the admin API when it is added
 * (`kv_events_endpoint`, `kv_events_replay_endpoint`).
 *
 * Every stream shares one TurnBudget: the intake does a bounded amount of work per event-loop turn
 * (issue 20). Each worker's batches wait in an EventApplier bounded by --kv-index-max-blocks; a
 * publisher that fills it (faster than the router applies) is shed: its backlog is dropped, its
 * precise state with it, and the worker routes approximately while it rebuilds.
 */
import type { Registry } from "prom-client";
import type { TokenSource } from "../index/hybrid-index.js";
import type { PreciseIndex } from "../index/precise-index.js";
import type { Logger } from "../logger.js";
import type { WorkerRegistry } from "../workers/registry.js";
import type { Worker } from "../workers/worker.js";
import { EventApplier } from "./event-applier.js";
import type { KvEvent } from "./events.js";
import type { LocalTokenizer } from "./local-tokenizer.js";
import { KvEventMetrics } from "./metrics.js";
import { KvEventSubscriber } from "./subscriber.js";
import type { TokenizeInput } from "./tokenize-input.js";
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
  /** Most blocks waiting to be applied per worker before its stream is shed (--kv-index-max-blocks). */
  maxPendingBlocks: number;
  tokenizeRequestTimeoutMs: number;
  tokenizerCacheTokens: number;
  /** Tokenizes prompt strings in this process instead of calling the workers (--tokenizer-path). */
  localTokenizer?: LocalTokenizer | undefined;
}

export interface KvEndpoints {
  endpoint: string;
  replayEndpoint?: string | undefined;
}

const RECONNECT_MIN_MS = 100;
const RECONNECT_MAX_MS = 10_000;
/** Intake work per event-loop turn, all streams together, before sockets and timers get a turn. */
const TURN_BUDGET_MS = 4;
/** Tokens one /tokenize answer may hold. */
const MAX_TOKENS = 1 << 20;

export class KvEventsManager implements TokenSource {
  private readonly subscribers = new Map<
    string,
    { subscriber: KvEventSubscriber; applier: EventApplier; endpoints: KvEndpoints }
  >();
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
        [...this.subscribers.keys()].map((id) => ({
          id,
          blocks: precise.blockCount(id),
          live: this.isLive(id),
        })),
      tokenizerCacheTokens: () => this.tokenizer.size,
    });
    registry.onChange((event, worker) => {
      if (event === "added") this.attachFromTemplate(worker);
      else this.detach(worker.id);
    });
    for (const worker of registry.list()) this.attachFromTemplate(worker);
  }

  /** Endpoints given for one worker (admin API), replacing the template's. */
  configure(worker: Worker, endpoints: KvEndpoints): void {
    this.attach(worker, endpoints);
  }

  endpointsOf(workerId: string): KvEndpoints | undefined {
    return this.subscribers.get(workerId)?.endpoints;
  }

  stateOf(workerId: string): string | undefined {
    return this.subscribers.get(workerId)?.subscriber.state;
  }

  isLive(workerId: string): boolean {
    return this.subscribers.get(workerId)?.subscriber.live ?? false;
  }

  cached(model: string | undefined, input: TokenizeInput): readonly number[] | undefined {
    const known = this.tokenizer.known(model, input);
    if (known === undefined) return undefined;
    this.metrics.tokenize.inc({ outcome: known.computed ? "local" : "cached" });
    return known.tokens;
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
    this.detach(worker.id, false);
    const id = worker.id;
    const m = this.metrics;
    const counts = new Map<string, number>();
    const applier = new EventApplier({
      budget: this.budget,
      maxPendingBlocks: this.settings.maxPendingBlocks,
      apply: (event, first) => this.applyEvent(id, event, first, counts),
      sliceDone: () => this.count(id, counts),
    });
    const subscriber = new KvEventSubscriber({
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
        if (reason === "too_large") {
          this.logger.warn(
            { worker: id, bytes, limit: this.settings.maxMessageBytes },
            "kv events: batch over --kv-events-max-message-bytes refused",
          );
        } else if (subscriber.live) {
          this.logger.warn(
            { worker: id, dropped_batches: batches, bytes },
            "kv events: publisher faster than the router applies; backlog shed, routing approximately",
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
    this.subscribers.set(id, { subscriber, applier, endpoints });
    this.precise.addWorker(id);
    subscriber.start();
    this.logger.info(
      { worker: id, endpoint: endpoints.endpoint, replay: endpoints.replayEndpoint ?? null },
      "kv events: subscribed",
    );
  }

  private detach(workerId: string, forget = true): void {
    const entry = this.subscribers.get(workerId);
    if (entry === undefined) return;
    entry.subscriber.close();
    entry.applier.drop();
    this.subscribers.delete(workerId);
    if (forget) this.precise.clear(workerId);
  }

  /**
   * The worker's backlog is full: its engine publishes faster than the router applies. The backlog
   * and the state built on the stream are dropped (what was queued is lost), and the worker routes
   * approximately for --kv-events-rebuild-secs while new events rebuild its index.
   */
  private shed(workerId: string, subscriber: KvEventSubscriber, applier: EventApplier): void {
    const wasLive = subscriber.live;
    const dropped = applier.drop() + 1; // the batch that did not fit
    this.metrics.refused.inc({ worker: workerId, reason: "overload" }, dropped);
    this.metrics.resets.inc({ worker: workerId, reason: "overload" });
    this.precise.clear(workerId);
    subscriber.rebuild();
    // Once per episode: a flood sheds again and again while it lasts.
    if (wasLive) {
      this.logger.warn(
        { worker: workerId, dropped_batches: dropped },
        "kv events: publisher faster than the router applies; backlog shed, routing approximately",
      );
    }
  }

  private applyEvent(
    workerId: string,
    event: KvEvent,
    first: boolean,
    counts: Map<string, number>,
  ): void {
    const result = this.precise.apply(workerId, event);
    // An event applied in pieces counts once (its first piece decides an orphan too).
    if (!first) return;
    const key = result === "applied" ? event.type : `!${result}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }

  /** Counted per slice, not per event: a slice can hold a thousand events. */
  private count(workerId: string, counts: Map<string, number>): void {
    for (const [key, n] of counts) {
      if (key.startsWith("!"))
        this.metrics.skipped.inc({ worker: workerId, reason: key.slice(1) }, n);
      else this.metrics.events.inc({ worker: workerId, type: key }, n);
    }
    counts.clear();
  }
}

function hostOf(url: string): string {
  return new URL(url).hostname;
}
