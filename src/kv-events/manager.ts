/**
 * KV-event intake for the fleet (--kv-events): one subscriber per worker, events applied to the
 * precise index, and the tokens the hybrid index needs (the workers' /tokenize endpoints).
 *
 * A worker's endpoints come from the templates (--kv-events-endpoint-template, e.g.
 * `tcp://{host}:5557`, and --kv-events-replay-template) or from the admin API when it is added
 * (`kv_events_endpoint`, `kv_events_replay_endpoint`).
 */
import type { Registry } from "prom-client";
import type { TokenSource } from "../index/hybrid-index.js";
import type { PreciseIndex } from "../index/precise-index.js";
import type { Logger } from "../logger.js";
import type { WorkerRegistry } from "../workers/registry.js";
import type { Worker } from "../workers/worker.js";
import type { EventBatch } from "./events.js";
import type { LocalTokenizer } from "./local-tokenizer.js";
import { KvEventMetrics } from "./metrics.js";
import { KvEventSubscriber } from "./subscriber.js";
import type { TokenizeInput } from "./tokenize-input.js";
import { TokenizerClient } from "./tokenizer-client.js";

export interface KvEventsSettings {
  endpointTemplate: string;
  /** "" = the engines have no replay endpoint. */
  replayTemplate: string;
  replayTimeoutMs: number;
  rebuildMs: number;
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
const MAX_MESSAGE_BYTES = 64 * 1024 * 1024;
/** Tokens one /tokenize answer may hold. */
const MAX_TOKENS = 1 << 20;

export class KvEventsManager implements TokenSource {
  private readonly subscribers = new Map<
    string,
    { subscriber: KvEventSubscriber; endpoints: KvEndpoints }
  >();
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
    const subscriber = new KvEventSubscriber({
      endpoint: endpoints.endpoint,
      replayEndpoint: endpoints.replayEndpoint,
      replayTimeoutMs: this.settings.replayTimeoutMs,
      rebuildMs: this.settings.rebuildMs,
      reconnectMinMs: RECONNECT_MIN_MS,
      reconnectMaxMs: RECONNECT_MAX_MS,
      maxMessageBytes: MAX_MESSAGE_BYTES,
      onBatch: (batch) => this.apply(id, batch),
      onReset: (reason) => {
        m.resets.inc({ worker: id, reason });
        this.precise.clear(id);
        this.logger.warn({ worker: id, reason }, "kv events: precise index dropped");
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
    this.subscribers.set(id, { subscriber, endpoints });
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
    this.subscribers.delete(workerId);
    if (forget) this.precise.clear(workerId);
  }

  private apply(workerId: string, batch: EventBatch): void {
    // Counted per batch, not per event: a batch can hold thousands of events.
    const counts = new Map<string, number>();
    for (const event of batch.events) {
      const result = this.precise.apply(workerId, event);
      const key = result === "applied" ? event.type : `!${result}`;
      counts.set(key, (counts.get(key) ?? 0) + 1);
    }
    for (const [key, n] of counts) {
      if (key.startsWith("!"))
        this.metrics.skipped.inc({ worker: workerId, reason: key.slice(1) }, n);
      else this.metrics.events.inc({ worker: workerId, type: key }, n);
    }
  }
}

function hostOf(url: string): string {
  return new URL(url).hostname;
}
