import { Client, Pool } from "undici";
import type { EngineKind } from "../engines/engine-reading.js";
import { type BreakerOptions, type BreakerView, CircuitBreaker } from "./breaker.js";
import { CharsPerToken } from "./chars-per-token.js";
import { DEFAULT_DECLARED, type DeclaredFields } from "./declared-fields.js";
import { guardedLookup } from "./guarded-lookup.js";
import { type DispatchLoad, WorkerLease } from "./lease.js";
import { LoraResidency } from "./lora-residency.js";
import { RunningReserve } from "./running-reserve.js";
import { freeSlots, fullBatchOf } from "./saturation.js";
import { EngineSignals } from "./signals.js";
import { WorkerLoad } from "./worker-load.js";
import { REGULAR_ROLE, type WorkerRole } from "./worker-role.js";

export interface WorkerOptions {
  breaker: Omit<BreakerOptions, "now">;
  connectTimeoutMs: number;
  /** Connections open to the worker at most, busy and idle (0 or undefined = no cap). */
  maxConnections?: number;
  /** Refuse connections whose host name resolves to a link-local / metadata address. */
  refuseLinkLocal?: boolean;
  /**
   * Requests every worker runs at once, as the operator said (--worker-max-running; a worker's own
   * `max_running` wins): admission's batch cap before any reading (workers/saturation.ts).
   */
  maxRunning?: number;
  /** How long an idle connection to the worker is kept (default IDLE_KEEP_ALIVE_MS). */
  idleKeepAliveMs?: number;
}

/**
 * How long the router keeps an idle connection to a worker that does not say how long it keeps
 * one (no Keep-Alive header; undici follows the header when there is one, less 2 s). Engines close
 * an idle connection after 5 s without saying so (uvicorn's timeout_keep_alive=5 in SGLang's
 * python/sglang/srt/entrypoints/http_server.py; vLLM's VLLM_HTTP_TIMEOUT_KEEP_ALIVE, default 5),
 * so the router closes first: a request sent on a connection the engine is closing fails before
 * any answer, and an engine poll every 5 s met that close now and then (kept 30 s, as before,
 * against a server closing idle connections after 500 ms, 4 of 80 polls 500 ms apart failed).
 * Polls further apart than the engine's timeout open a connection each whatever the router keeps.
 */
export const IDLE_KEEP_ALIVE_MS = 4_000;

/**
 * One inference server behind the router: where it is, how loaded and healthy it is. What it
 * probably caches is the prefix index's business (src/index/), keyed by the worker's id.
 */
export class Worker {
  /** This router's own load there, written only by the worker's leases (lease.ts). */
  private readonly load = new WorkerLoad();
  private readonly circuit: CircuitBreaker;
  private peers = 0;
  private peerPendingChars = 0;
  private peerPendingRequests = 0;
  private drainingNow = false;
  private coolingUntil = 0;
  private corrections = 0;
  /** The engine gauges the last reading showed (inFlightMostSinceGauges). */
  private lastGauges: readonly (number | undefined)[] | undefined;
  private indexedCharsSource: () => number = () => 0;

  /**
   * Takes the request's load on the worker until the returned lease is finished (lease.ts): the
   * one way in-flight counts, pending prefill, the served count and the breaker change.
   */
  dispatch(load: DispatchLoad): WorkerLease {
    return new WorkerLease(this.load, this.circuit, load);
  }

  /** Requests this router dispatched to the worker and that have not finished (exact). */
  get ownInFlight(): number {
    return this.load.inFlight;
  }
  /**
   * Starts counting the most ownInFlight reaches from now (an engine read's start); returns the
   * count now. inFlightPeak then says the most since.
   */
  markInFlightPeak(): number {
    this.load.inFlightPeakPrev = this.load.inFlightPeak;
    this.load.inFlightPeak = this.load.inFlight;
    return this.load.inFlight;
  }
  /**
   * The most of this router's requests there since the engine may have set the gauges a reading
   * (just read, `gauges`) shows. An engine sets them from its scheduler loop, not at the read:
   * vLLM after each step, SGLang at each prefill batch and only every --decode-log-interval (40)
   * decode steps while its batch just decodes, and every 30 s while idle
   * (sim/engine-gauges.ts has the sources). So gauges that changed since the previous reading
   * were set after that read started; gauges unchanged may be older still, back to the read
   * before the first that showed them. A request of this router that ended within that window may
   * still be in the gauges: counted from the most, it is never taken for another's work (a free
   * slot the release rule would keep empty until the engine's next update, up to 30 s when it
   * is idle).
   */
  inFlightMostSinceGauges(gauges: readonly (number | undefined)[]): number {
    const same =
      this.lastGauges !== undefined && gauges.every((g, i) => g === this.lastGauges?.[i]);
    if (!same) this.load.inFlightPeakGauges = this.load.inFlightPeakPrev;
    this.lastGauges = gauges;
    return Math.max(this.load.inFlightPeakGauges, this.load.inFlight);
  }
  /** The most ownInFlight has been since markInFlightPeak. */
  get inFlightPeak(): number {
    return this.load.inFlightPeak;
  }
  /**
   * The other replicas' in-flight counts for this worker, as they last published them
   * (--state-url; state/load-sync.ts). 0 without shared state.
   */
  get peerInFlight(): number {
    return this.peers;
  }
  setPeerInFlight(count: number): void {
    this.peers = count;
  }
  /**
   * Uncached prompt characters (text length − what the index said this worker held) of the
   * in-flight requests that have no first byte back yet: prefill work queued on the engine, as the
   * router estimates it. Added at dispatch, removed at the lease's first byte or finish, whichever
   * comes first (lease.ts). Read by the prefix_cost policy.
   */
  get pendingPrefillChars(): number {
    return this.load.pendingPrefillChars;
  }
  /** How many requests pendingPrefillChars adds up (same bounds: dispatch to first byte or end). */
  get pendingPrefillRequests(): number {
    return this.load.pendingPrefillRequests;
  }
  /** Those of them whose first byte the router sees as the engine sends it (lease.ts). */
  get visiblePrefillRequests(): number {
    return this.load.visiblePrefillRequests;
  }
  /**
   * The prefill the other replicas queued there (--state-url, radixgate-cluster): their last load
   * reports plus their decisions since (state/peer-pending.ts). 0 without shared state.
   */
  get peerPendingPrefillChars(): number {
    return this.peerPendingChars;
  }
  /** How many requests peerPendingPrefillChars adds up. */
  get peerPendingPrefillRequests(): number {
    return this.peerPendingRequests;
  }
  setPeerPendingPrefill(chars: number, requests: number): void {
    this.peerPendingChars = chars;
    this.peerPendingRequests = requests;
  }
  /**
   * Routing-text characters of this router's in-flight requests there (dispatch to end): the
   * sequences the worker holds active, as NVIDIA Dynamo's router tracks its active blocks
   * (scheduling/prefix-scorers.ts DynamoCostScorer).
   */
  get activeChars(): number {
    return this.load.activeChars;
  }
  /**
   * How busy one data-parallel rank is: the requests waiting in its queue as the engine last
   * reported them (0 when it reports no queue per rank, or not lately) plus this router's requests
   * in flight there.
   */
  rankLoad(rank: number): number {
    return (this.signals.rankQueued(rank) ?? 0) + (this.rankInFlight[rank] ?? 0);
  }
  /**
   * This router's in-flight requests per data-parallel rank, for those sent to a chosen rank
   * (--kv-events-dp-size; proxy/forward.ts). Index = rank; empty for an engine without ranks.
   */
  get rankInFlight(): readonly number[] {
    return this.load.rankInFlight;
  }
  /**
   * This router's in-flight requests there that the engine got with a priority strictly below
   * `priority` (--engine-priority; higher first): the work its priority scheduler puts behind a
   * request of `priority`. A request sent without the router's priority is never counted here.
   */
  ownInFlightBelow(priority: number): number {
    return this.load.enginePriorities.below(priority);
  }
  /** Called when none of this router's prompts there waits for a first byte any more. */
  set onPrefillIdle(listener: (() => void) | undefined) {
    this.load.onPrefillIdle = listener;
  }
  /** This router's prefill there ahead of a request of `priority` (WorkerLoad.prefillAheadOf). */
  prefillAheadOf(priority: number, now: number): number | undefined {
    return this.load.prefillAheadOf(priority, now);
  }
  /** The lowest engine priority of this router's requests in flight there (--engine-priority). */
  lowestEnginePriority(): number | undefined {
    return this.load.enginePriorities.lowest();
  }
  /** Requests that completed with a response from this worker. */
  get served(): number {
    return this.load.served;
  }
  /** The circuit breaker, to read; its outcomes come from the leases. */
  get breaker(): BreakerView {
    return this.circuit;
  }
  private declaredNow: DeclaredFields = DEFAULT_DECLARED;
  /** --worker-max-running (undefined: not said), for a worker that says no cap of its own. */
  private readonly fleetMaxRunning: number | undefined;
  /** What the operator said of it when adding it (model_id, priority, cost, labels, ...). */
  get declared(): DeclaredFields {
    return this.declaredNow;
  }
  /** Takes what the operator said (at add, or SGLang's PUT /workers/{id}) over what was said before. */
  declare(fields: Partial<DeclaredFields>): void {
    this.declaredNow = { ...this.declaredNow, ...fields };
    this.signals.declaredMaxRunning = this.declaredNow.maxRunning ?? this.fleetMaxRunning;
    // What it serves until its /v1/models is read (introspection.ts replaces it).
    if (fields.modelId !== undefined && this.servedModels === undefined)
      this.servedModels = new Set([fields.modelId]);
  }
  /** Result of active health checks; unhealthy workers keep their tree but get no traffic. */
  healthy = true;
  healthFailures = 0;
  healthSuccesses = 0;
  /** Set when removed from the registry: no new requests, in-flight ones complete. */
  removed = false;
  /**
   * Set while a discovery source has dropped it but its grace period runs (discovery/): no new
   * requests, in-flight ones complete, and it keeps its tree in case it comes back.
   */
  get draining(): boolean {
    return this.drainingNow;
  }
  setDraining(draining: boolean): void {
    this.drainingNow = draining;
  }
  /**
   * Epoch ms until which the worker gets no new requests, because it answered 429/503 with a
   * Retry-After (proxy/forward.ts). 0 = not cooling down.
   */
  get coolDownUntil(): number {
    return this.coolingUntil;
  }
  /** No new requests until `until` (epoch ms); a cool-down already longer stays. */
  coolDown(until: number): void {
    if (until > this.coolingUntil) this.coolingUntil = until;
  }
  /** What its engine reports: KV capacity, queue, KV usage, with their age (workers/introspection.ts). */
  readonly signals = new EngineSignals();
  /** Budget of its prefix tree in characters, as last set (workers/tree-budget.ts). */
  treeBudget: number | undefined = undefined;
  /** Characters the prefix index holds for this worker (for reports only). */
  indexedChars(): number {
    return this.indexedCharsSource();
  }
  /** Where indexedChars() reads from: the index, which follows the registry (index/follow-workers.ts). */
  countIndexedCharsWith(source: () => number): void {
    this.indexedCharsSource = source;
  }
  /** Characters of routing text per prompt token, learned from the engine's usage reports. */
  readonly charsPerTokenEstimate = new CharsPerToken();
  /** Times the engine reported clearly fewer cached tokens than the index claimed (index trimmed). */
  get feedbackCorrections(): number {
    return this.corrections;
  }
  noteFeedbackCorrection(): void {
    this.corrections += 1;
  }
  /** The engine reported how many prompt tokens `chars` characters of routing text made. */
  learnCharsPerToken(chars: number, tokens: number): void {
    this.charsPerTokenEstimate.observe(chars, tokens);
  }
  /** What each running request holds of its engine's KV beyond its text (running-reserve.ts). */
  readonly running = new RunningReserve();

  /** Characters of KV each running request holds beyond its text (PolicyWorker). */
  get runningReserveChars(): number {
    return this.running.chars(this.charsPerToken);
  }
  /**
   * Models and LoRA adapters the worker serves (from its /v1/models); undefined = not known, so
   * it is a candidate for any model.
   */
  servedModels: ReadonlySet<string> | undefined = undefined;
  /** Which of its LoRA adapters its engine holds loaded (lora-residency.ts). */
  readonly lora = new LoraResidency();

  /** Whether its engine holds `adapter` loaded now; undefined = not known (lora-residency.ts). */
  loraResident(adapter: string, now: number): boolean | undefined {
    return this.lora.resident(adapter, now, this.signals.engine, this.signals.staleAfterMs);
  }

  /** The router sent it a request for `adapter`. */
  loraRouted(adapter: string): void {
    this.lora.routed(adapter);
  }

  /** The engine it runs, once introspection recognised it (served-models.ts routes by it). */
  get engine(): EngineKind | undefined {
    return this.signals.engine;
  }
  /**
   * Keep-alive connection pool to this worker, made at its first use. An undici Pool holds about
   * 18 KB of heap before any connection (its request queue is a 2,048-slot array): 10,000
   * unreachable workers from a worker file held 185 MB of them, and the old-generation collections
   * over that heap held the event loop for 150-280 ms at a time. A worker that never answers its
   * health checks never gets one (they go through `probeClient`).
   */
  get pool(): Pool {
    this.ownPool ??= new Pool(this.origin, {
      ...this.clientOptions,
      ...(this.maxConnections === undefined ? {} : { connections: this.maxConnections }),
    });
    return this.ownPool;
  }
  private ownPool: Pool | undefined;
  private readonly origin: string;
  private readonly clientOptions: Client.Options;
  private readonly maxConnections: number | undefined;
  /** Path prefix of the worker's base URL (e.g. "/sglang" for http://host/sglang), "" for none. */
  readonly basePath: string;

  /**
   * Bearer key the router sends to this worker (data plane and health checks), for engines started
   * with --api-key. A non-enumerable property, so no JSON or log of the worker can carry it.
   */
  declare readonly apiKey: string | undefined;

  constructor(
    readonly id: string,
    readonly url: string,
    options: WorkerOptions,
    apiKey?: string,
    /** Regular, or one side of prefill/decode disaggregation (worker-role.ts); fixed for its life. */
    readonly role: WorkerRole = REGULAR_ROLE,
  ) {
    Object.defineProperty(this, "apiKey", { value: apiKey, enumerable: false });
    this.circuit = new CircuitBreaker({ ...options.breaker });
    this.fleetMaxRunning = options.maxRunning || undefined;
    this.signals.declaredMaxRunning = this.fleetMaxRunning;
    const parsed = new URL(url);
    this.basePath = parsed.pathname.replace(/\/$/, "");
    this.origin = parsed.origin;
    this.clientOptions = {
      connect: {
        timeout: options.connectTimeoutMs,
        ...(options.refuseLinkLocal ? { lookup: guardedLookup() } : {}),
      },
      keepAliveTimeout: options.idleKeepAliveMs ?? IDLE_KEEP_ALIVE_MS,
      // Timeouts are set per request (see proxy/forward.ts); these only bound idle sockets.
    };
    // Without a cap, a burst of 10k streams left 8k idle sockets open to one worker.
    this.maxConnections = options.maxConnections || undefined;
  }

  /**
   * What a control-plane request to a worker out of traffic goes through: its pool if it has one,
   * else a Client of its own (about 2 KB) that the caller closes after the request, so that a
   * worker that never passes a check never holds a pool.
   */
  probeClient(): { dispatcher: Pool | Client; oneShot: boolean } {
    if (this.ownPool !== undefined) return { dispatcher: this.ownPool, oneShot: false };
    return { dispatcher: new Client(this.origin, this.clientOptions), oneShot: true };
  }

  /** Closes the pool, if one was made; in-flight requests complete first. */
  async closePool(): Promise<void> {
    await this.ownPool?.close();
  }

  /** Requests in flight on the worker fleet-wide: this router's own plus its peers' (what policies weigh). */
  get inFlight(): number {
    return this.ownInFlight + this.peerInFlight;
  }

  /** Characters of routing text per prompt token (default 4 until the engine reported usage). */
  get charsPerToken(): number {
    return this.charsPerTokenEstimate.value;
  }

  /**
   * Requests in the engine's queue at its last report that this router did not send (another
   * replica's, direct clients'): the reported queue minus this router's requests pending there at
   * that moment, never below 0; undefined when the report is stale at `now` or has no queue.
   * Counted against the router's count at the report, not today's: with one router and a report a
   * few seconds old, the difference to today's count is not foreign work, only the age.
   */
  foreignQueuedAt(now: number): number | undefined {
    return this.signals.foreignQueued(now);
  }

  /** Healthy, not removed or draining, not cooling down, and the breaker lets a request through. */
  get available(): boolean {
    return (
      this.healthy &&
      !this.removed &&
      !this.draining &&
      (this.coolingUntil === 0 || Date.now() >= this.coolingUntil) &&
      this.circuit.admits()
    );
  }

  /** ms left of a Retry-After cool-down, 0 when none. */
  get coolDownMs(): number {
    return Math.max(0, this.coolingUntil - Date.now());
  }

  /** The Authorization header the router sends to this worker, if it has a key. */
  get authorization(): string | undefined {
    return this.apiKey === undefined ? undefined : `Bearer ${this.apiKey}`;
  }

  /** What the engine reported (null where unknown; queue and KV usage only while fresh). */
  private engineJSON() {
    const load = this.signals.load();
    const age = this.signals.ageSecs();
    return {
      engine: this.signals.engine ?? null,
      kv_capacity_tokens: this.signals.lastCapacity ?? null,
      kv_capacity_source: this.signals.capacityFrom ?? null,
      tree_budget_characters: this.treeBudget ?? null,
      engine_queue: load?.queued ?? null,
      engine_running: load?.running ?? null,
      kv_usage: load?.kvUsage ?? null,
      signal_age_secs: age === undefined ? null : Math.round(age * 10) / 10,
      served_models: this.servedModels === undefined ? null : [...this.servedModels],
      lora: this.lora.toJSON(),
    };
  }

  /**
   * Each data-parallel rank as the router sees it: this router's requests in flight there and what
   * the engine reported for it (null where unknown; queue and usage only while fresh). Absent for
   * an engine without ranks. The worker's own fields stay the sum over its ranks.
   */
  private ranksJSON() {
    const reported = this.signals.ranks();
    const count = Math.max(
      this.rankInFlight.length,
      reported?.length ?? 0,
      this.signals.dpSize ?? 0,
    );
    if (count < 2) return {};
    const ranks = Array.from({ length: count }, (_, rank) => ({
      rank,
      in_flight_here: this.rankInFlight[rank] ?? 0,
      engine_queue: reported?.[rank]?.queued ?? null,
      engine_running: reported?.[rank]?.running ?? null,
      kv_usage: reported?.[rank]?.kvUsage ?? null,
      kv_capacity_tokens: this.signals.rankCapacity(rank, count) ?? null,
    }));
    return { ranks };
  }

  toJSON() {
    return {
      id: this.id,
      url: this.url,
      // SGLang's WorkerInfo fields first (sgl-model-gateway/src/protocols/worker_spec.rs), then
      // radixgate's own; `load` is SGLang's name for the router's requests in flight there.
      model_id: this.declared.modelId ?? firstOf(this.servedModels) ?? "unknown",
      priority: this.declared.priority,
      cost: this.declared.cost,
      worker_type: this.role.type,
      ...(this.role.type === "regular" ? {} : { bootstrap_port: this.role.bootstrapPort }),
      is_healthy: this.healthy,
      load: this.inFlight,
      connection_mode: "http",
      labels: this.declared.labels,
      ...(this.declared.healthChecks ? {} : { disable_health_check: true }),
      ...(this.declared.maxRunning !== undefined ? { max_running: this.declared.maxRunning } : {}),
      healthy: this.healthy,
      ...(this.draining ? { draining: true } : {}),
      circuit: this.breaker.state,
      in_flight: this.inFlight,
      in_flight_here: this.ownInFlight,
      ...(this.rankInFlight.length > 0 ? { in_flight_per_rank: [...this.rankInFlight] } : {}),
      ...(this.load.enginePriorities.size > 0
        ? { in_flight_by_engine_priority: this.load.enginePriorities.toJSON() }
        : {}),
      pending_prefill_chars: this.pendingPrefillChars,
      // The engine's prefill speed as the router learned it (WorkerLoad.learnPrefill), once it has.
      ...(this.load.prefillCharsPerMs > 0
        ? { prefill_chars_per_ms: Math.round(this.load.prefillCharsPerMs * 10) / 10 }
        : {}),
      // Other replicas' queued prefill there, when shared state says there is some.
      ...(this.peerPendingChars > 0 ? { peer_pending_prefill_chars: this.peerPendingChars } : {}),
      // Admission's slot accounting (saturation.ts): the batch cap and the slots free in it.
      batch_cap: fullBatchOf(this) ?? null,
      free_slots: freeSlots(this, Date.now()) ?? null,
      tree_characters: this.indexedChars(),
      requests_served: this.served,
      cool_down_ms: this.coolDownMs,
      chars_per_token: Math.round(this.charsPerToken * 100) / 100,
      feedback_corrections: this.feedbackCorrections,
      ...this.engineJSON(),
      ...this.ranksJSON(),
      // Whether the router authenticates to it; the key itself is never shown.
      api_key: this.apiKey !== undefined,
    };
  }
}

function firstOf(models: ReadonlySet<string> | undefined): string | undefined {
  if (models === undefined) return undefined;
  for (const model of models) return model;
  return undefined;
}
