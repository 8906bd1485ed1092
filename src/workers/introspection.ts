import type { MetricsReading } from "../engines/engine-reading.js";
import { readAdapterIds, readModelsList, readModelsOwner } from "../engines/models-list.js";
import { parseExposition } from "../engines/prometheus-text.js";
import { readSglangMetrics } from "../engines/sglang-metrics.js";
import { readSglangServerInfo } from "../engines/sglang-server-info.js";
import { readVllmMetrics } from "../engines/vllm-metrics.js";
import type { Logger } from "../logger.js";
import { ProbeSlots, SPREAD_SHARE, spreadOver } from "./probe-slots.js";
import type { WorkerRegistry } from "./registry.js";
import { STALE_AFTER_INTERVALS } from "./signals.js";
import type { Worker } from "./worker.js";
import { readCappedBody, requestWorker } from "./worker-request.js";

export interface IntrospectionOptions {
  /** Between two reads of every worker; 0 = off (no timer, no read on add). */
  intervalMs: number;
  /** Limit for one read of one endpoint. */
  timeoutMs: number;
  /** Largest body read from one endpoint (a vLLM /metrics is ~100 KB). */
  maxBodyBytes?: number;
}

const DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024;

type Endpoint = "/get_server_info" | "/metrics" | "/v1/models";

/** Why an endpoint gave nothing usable; "absent" (404/405) is normal and never logged as a fault. */
type Outcome = { ok: true } | { ok: false; absent: boolean; unauthorized: boolean; reason: string };

class EndpointAbsent extends Error {}
/** The worker wants a key the router did not send (or not that one). */
class WorkerUnauthorized extends Error {}

/**
 * Reads every healthy worker's engine on a schedule, and a worker as soon as it may take traffic
 * (added, or let in by its health checks): SGLang /get_server_info
 * (KV capacity), /metrics of either engine (queue, KV usage, vLLM's capacity), /v1/models (models
 * and adapters served). A worker exposing none of it works as before. Failures are logged once per
 * change of state (not every interval), and whatever was not read keeps ageing until ignored.
 */
export class EngineIntrospector {
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private readonly running = new Set<Worker>();
  /** Workers read at once (probe-slots.ts). */
  readonly slots = new ProbeSlots();
  /** Last outcome per worker and endpoint, to log changes only. */
  private readonly outcomes = new WeakMap<Worker, Map<Endpoint, string>>();
  /** Workers already warned about a 401: one warning per worker, not one per endpoint and read. */
  private readonly warnedUnauthorized = new WeakSet<Worker>();

  constructor(
    private readonly registry: WorkerRegistry,
    readonly options: IntrospectionOptions,
    private readonly logger: Logger,
    /** Called after every read of a worker (tree budgets are re-evaluated there). */
    private readonly onRead: (worker: Worker) => void = () => {},
  ) {
    registry.onChange((event, worker) => {
      if (event !== "added") return;
      // Once the caller is done adding it: a worker then under its first health check is read
      // when that passes (readNow, from the health checker), not while it may still be failing.
      setImmediate(() => {
        if (worker.healthy) this.readNow(worker);
      });
    });
  }

  /** Reads `worker` at once (it was added, or its health checks let it back in). */
  readNow(worker: Worker): void {
    if (this.enabled && !this.stopped) void this.poll(worker);
  }

  private get enabled(): boolean {
    return this.options.intervalMs > 0;
  }

  start(): void {
    if (!this.enabled || this.timer) return;
    this.stopped = false;
    this.timer = setInterval(() => void this.pollAll(), this.options.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /**
   * One read of every worker that may take traffic, spread over most of the interval: an unhealthy
   * worker's signals steer nothing (it gets no request), and reading 10,000 failing workers' three
   * endpoints every interval was most of a busy router's work. Read again once healthy, at the next
   * pass; a worker with health checks off is read whatever its state.
   */
  pollAll(): Promise<void> {
    const readable = this.registry.list().filter((w) => w.healthy || !w.declared.healthChecks);
    return spreadOver(
      readable,
      this.options.intervalMs * SPREAD_SHARE,
      (w) => this.poll(w),
      () => this.stopped,
    );
  }

  /**
   * One read of one worker's endpoints; reads of the same worker are not stacked, and at most
   * MAX_PROBES_IN_FLIGHT endpoint reads are in flight at once (probe-slots.ts).
   */
  async poll(worker: Worker): Promise<void> {
    if (this.running.has(worker) || worker.removed) return;
    this.running.add(worker);
    worker.signals.staleAfterMs = STALE_AFTER_INTERVALS * this.options.intervalMs;
    try {
      await this.readAll(worker);
      if (!worker.removed) this.onRead(worker);
    } catch (err) {
      this.logger.error({ err, worker: worker.id }, "engine introspection failed");
    } finally {
      this.running.delete(worker);
    }
  }

  private async readAll(worker: Worker): Promise<void> {
    // One after another, on one kept-alive connection: three at once opened three per worker.
    await this.read(worker, "/get_server_info", (body) => this.serverInfo(worker, body));
    // The engine's queue counts this router's waiting requests too: remember how many there were.
    const pendingAtSend = worker.pendingPrefillRequests;
    const peerPendingAtSend = worker.peerPendingPrefillRequests;
    const inFlightAtSend = worker.markInFlightPeak();
    await this.read(worker, "/metrics", (body) =>
      this.metrics(worker, body, pendingAtSend, inFlightAtSend, peerPendingAtSend),
    );
    await this.read(worker, "/v1/models", (body) => this.models(worker, body));
  }

  /** One endpoint's read, in one of the slots (one connection each). */
  private read(worker: Worker, endpoint: Endpoint, use: (body: string) => void): Promise<void> {
    return this.slots.run(() =>
      worker.removed ? Promise.resolve() : this.readEndpoint(worker, endpoint, use),
    );
  }

  private async readEndpoint(
    worker: Worker,
    endpoint: Endpoint,
    use: (body: string) => void,
  ): Promise<void> {
    let outcome: Outcome;
    try {
      use(await this.fetchText(worker, endpoint));
      outcome = { ok: true };
    } catch (err) {
      outcome = {
        ok: false,
        absent: err instanceof EndpointAbsent,
        unauthorized: err instanceof WorkerUnauthorized,
        reason: describe(err, this.options.timeoutMs),
      };
    }
    if (worker.removed || this.stopped) return;
    this.report(worker, endpoint, outcome);
  }

  private async fetchText(worker: Worker, endpoint: Endpoint): Promise<string> {
    const res = await requestWorker(worker, endpoint, { timeoutMs: this.options.timeoutMs });
    if (res.statusCode === 404 || res.statusCode === 405) {
      await res.body.dump();
      throw new EndpointAbsent(`HTTP ${res.statusCode}`);
    }
    if (res.statusCode === 401) {
      await res.body.dump();
      throw new WorkerUnauthorized("HTTP 401");
    }
    if (res.statusCode < 200 || res.statusCode >= 300) {
      await res.body.dump();
      throw new Error(`HTTP ${res.statusCode}`);
    }
    const limit = this.options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
    return (await readCappedBody(res.body, limit)).toString("utf8");
  }

  private serverInfo(worker: Worker, body: string): void {
    const info = readSglangServerInfo(parseJson(body));
    if (info.dpSize !== undefined) worker.signals.dpSize = info.dpSize;
    if (info.maxRunningRequests !== undefined) {
      worker.signals.saidMaxRunning = info.maxRunningRequests;
    }
    worker.signals.preemptionThreshold = info.preemptionThreshold;
    worker.lora.maxLoaded = info.maxLoadedLoras;
    if (info.capacityTokens === undefined) {
      throw new Error("answer has no max_total_num_tokens");
    }
    worker.signals.engine = "sglang";
    this.capacity(worker, info.capacityTokens, "get_server_info");
  }

  private metrics(
    worker: Worker,
    body: string,
    pendingAtSend: number,
    inFlightAtSend: number,
    peerPendingAtSend: number,
  ): void {
    const families = parseExposition(body);
    const reading: MetricsReading | undefined =
      readVllmMetrics(families) ?? readSglangMetrics(families);
    if (reading === undefined) throw new Error("no SGLang or vLLM scheduler metric in it");
    const now = Date.now();
    worker.signals.engine ??= reading.engine;
    if (reading.dpSize !== undefined) worker.signals.dpSize = reading.dpSize;
    if (reading.blockSizeTokens !== undefined) {
      worker.signals.blockSizeTokens = reading.blockSizeTokens;
    }
    if (reading.lora !== undefined) worker.lora.report(reading.lora, now);
    worker.signals.recordLoad(
      {
        queued: reading.queued,
        running: reading.running,
        kvUsage: reading.kvUsage,
        routerPending: Math.max(pendingAtSend, worker.pendingPrefillRequests),
        routerPendingLeast: Math.min(pendingAtSend, worker.pendingPrefillRequests),
        routerInFlightLeast: Math.min(inFlightAtSend, worker.ownInFlight),
        routerInFlightMost: Math.max(
          inFlightAtSend,
          worker.inFlightPeak,
          worker.inFlightMostSinceGauges([reading.running, reading.queued, reading.kvUsage]),
        ),
        peerPending: Math.max(peerPendingAtSend, worker.peerPendingPrefillRequests),
      },
      now,
      reading.ranks,
    );
    // /get_server_info is SGLang's own word on capacity; the metric only stands in without it.
    const fromServerInfo =
      worker.signals.capacityFrom === "get_server_info" &&
      worker.signals.capacity(now) !== undefined;
    if (reading.capacityTokens !== undefined && !fromServerInfo) {
      this.capacity(worker, reading.capacityTokens, "metrics");
    }
  }

  private models(worker: Worker, body: string): void {
    const list = parseJson(body);
    // Which engine decides how a name it does not list is treated (workers/served-models.ts).
    worker.signals.engine ??= readModelsOwner(list);
    const served = readModelsList(list);
    worker.servedModels = worker.lora.listed(
      served,
      readAdapterIds(list),
      worker.signals.engine === "vllm",
    );
    worker.signals.recordSeen(Date.now());
  }

  private capacity(worker: Worker, tokens: number, source: "get_server_info" | "metrics"): void {
    if (tokens <= 0) {
      throw new Error(`reports a KV capacity of ${tokens} tokens; ignored`);
    }
    const before = worker.signals.lastCapacity;
    worker.signals.recordCapacity(tokens, source, Date.now());
    if (before !== tokens) {
      this.logger.info(
        { worker: worker.id, url: worker.url, capacity_tokens: tokens, source, previous: before },
        "worker KV capacity learned",
      );
    }
  }

  /** Logs when an endpoint's outcome changes (a fault once, its recovery once). */
  private report(worker: Worker, endpoint: Endpoint, outcome: Outcome): void {
    let byEndpoint = this.outcomes.get(worker);
    if (byEndpoint === undefined) {
      byEndpoint = new Map();
      this.outcomes.set(worker, byEndpoint);
    }
    const key = outcome.ok ? "ok" : outcome.reason;
    const previous = byEndpoint.get(endpoint);
    if (previous === key) return;
    byEndpoint.set(endpoint, key);
    const fields = { worker: worker.id, url: worker.url, endpoint };
    if (outcome.ok) {
      if (previous !== undefined) this.logger.info(fields, "engine signal readable again");
    } else if (outcome.unauthorized) {
      this.warnUnauthorized(worker, endpoint);
    } else if (outcome.absent) {
      // vLLM has no /get_server_info, SGLang has no /metrics without --enable-metrics.
      this.logger.debug({ ...fields, reason: outcome.reason }, "engine endpoint not exposed");
    } else {
      this.logger.warn(
        { ...fields, reason: outcome.reason },
        "engine signal unreadable; the router goes on without it",
      );
    }
  }

  /**
   * A worker started with --api-key answers 401 to a router that does not send its key: every
   * request would fail the same way, so say once which flag fixes it (never the key itself).
   */
  private warnUnauthorized(worker: Worker, endpoint: Endpoint): void {
    if (this.warnedUnauthorized.has(worker)) return;
    this.warnedUnauthorized.add(worker);
    this.logger.warn(
      {
        worker: worker.id,
        url: worker.url,
        endpoint,
        sent_key: worker.authorization !== undefined,
      },
      "worker answered 401 Unauthorized: it was started with --api-key; give the router that key with --worker-api-key (or as api_key in POST /workers)",
    );
  }
}

function parseJson(body: string): unknown {
  try {
    return JSON.parse(body);
  } catch {
    throw new Error("answer is not JSON");
  }
}

function describe(err: unknown, timeoutMs: number): string {
  const e = err as { name?: string; code?: string; message?: string };
  const timedOut =
    e.name === "TimeoutError" ||
    e.code === "UND_ERR_HEADERS_TIMEOUT" ||
    e.code === "UND_ERR_BODY_TIMEOUT";
  if (timedOut) return `no answer within ${timeoutMs} ms`;
  if (e.code !== undefined && /^E[A-Z]+$/.test(e.code)) return `connection failed (${e.code})`;
  return e.message ?? String(err);
}
