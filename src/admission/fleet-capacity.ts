import { Gauge, type Registry } from "prom-client";
import type { PrefixIndex } from "../index/prefix-index.js";
import { DEFAULT_CHARS_PER_TOKEN } from "../workers/chars-per-token.js";
import type { WorkerRegistry } from "../workers/registry.js";
import { fullBatchOf } from "../workers/saturation.js";
import type { Worker } from "../workers/worker.js";

/**
 * The fleet's saturation, for an autoscaler (KEDA, an HPA on external metrics): is the fleet
 * short of compute, short of cache, or neither, and how many workers would it take?
 *
 * Sampled every `pollMs`:
 * - prefill: demand = the uncached prompt tokens of the requests settled since the last sample,
 *   per second (what the engines had to prefill: the prompt less what they reported cached);
 *   capacity = healthy workers x `prefillTokensPerSec`.
 * - running slots: demand = the requests in flight on healthy workers (this replica's and its
 *   peers'), capacity = the sum of their batch caps (admission's: seen full, the operator's, or
 *   the engine's max running requests), else `defaultSlots`.
 * - cache pressure: the working set the index sees (the characters it holds plus those it evicted
 *   over the cool-down window: what was routed recently) over the fleet's KV capacity in
 *   characters (the engines' reported KV tokens x 4). Above 1 the fleet evicts prefixes it was
 *   still using: it is short of cache, which more compute of the same size would fix only by
 *   adding cache with it.
 *
 * Desired workers (per model, and "*" for the fleet): ceil(workers x the larger saturation ratio
 * / `targetUtilization`), at least 1. It rises at once, and falls only to the largest value of the
 * last `cooldownMs` (the HPA's scale-down stabilisation, done here so every consumer agrees).
 */
export interface FleetCapacityOptions {
  /** How often the signal is sampled (ms). */
  readonly pollMs: number;
  /** Utilisation the desired worker count aims at (0-1]. */
  readonly targetUtilization: number;
  /** How long desired workers stays at its recent maximum before it falls (ms). */
  readonly cooldownMs: number;
  /** Prefill throughput one worker is assumed to give (uncached prompt tokens a second). */
  readonly prefillTokensPerSec: number;
  /** Requests one worker runs at once when its engine did not say. */
  readonly defaultSlots: number;
}

/** Which resource a saturation ratio is about (the metric's `resource` label). */
export type SaturationResource = "prefill_tokens" | "running_slots";

interface ModelDemand {
  uncachedTokens: number;
}

export interface CapacityReading {
  readonly at: number;
  readonly workers: number;
  readonly prefill: { demandPerSec: number; capacityPerSec: number; ratio: number };
  readonly slots: { demand: number; capacity: number; ratio: number };
  readonly cache: { workingSetChars: number; capacityChars: number; ratio: number | null };
  /** model ("*" = the fleet) → desired workers after the cool-down; and before it. */
  readonly desired: Map<string, { desired: number; raw: number; workers: number }>;
  /** What the fleet is short of, if anything. */
  readonly shortOf: "compute" | "cache" | "compute_and_cache" | "nothing";
}

/** Models kept apart in the demand; the rest count for the fleet only. */
const MAX_MODELS = 64;
const FLEET = "*";

export class FleetCapacity {
  private uncachedByModel = new Map<string, ModelDemand>();
  private uncachedTotal = 0;
  private lastSampleAt: number;
  /** Evicted characters per sample, over the cool-down window. */
  private evictions: { at: number; chars: number }[] = [];
  private evictedSince = 0;
  /** Raw desired counts per model over the cool-down window. */
  private history = new Map<string, { at: number; raw: number }[]>();
  private reading: CapacityReading | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly registry: WorkerRegistry,
    private readonly index: PrefixIndex,
    readonly options: FleetCapacityOptions,
    private readonly now: () => number = Date.now,
  ) {
    this.lastSampleAt = now();
  }

  /** A request settled: `uncachedTokens` of its prompt were prefilled by the engine. */
  noteUncached(model: string | undefined, uncachedTokens: number): void {
    if (!(uncachedTokens > 0)) return;
    this.uncachedTotal += uncachedTokens;
    const key = model ?? FLEET;
    let entry = this.uncachedByModel.get(key);
    if (entry === undefined && this.uncachedByModel.size < MAX_MODELS) {
      entry = { uncachedTokens: 0 };
      this.uncachedByModel.set(key, entry);
    }
    if (entry !== undefined && key !== FLEET) entry.uncachedTokens += uncachedTokens;
  }

  /** The index evicted `chars` characters (they were routed, and are no longer held). */
  noteEvicted(chars: number): void {
    this.evictedSince += chars;
  }

  /** Samples now; the gauges read the last sample. */
  sample(): CapacityReading {
    const now = this.now();
    const { options } = this;
    const elapsedSec = Math.max(0.001, (now - this.lastSampleAt) / 1000);
    this.lastSampleAt = now;
    const healthy = this.registry.list().filter((w) => w.healthy && !w.removed);
    const workers = healthy.length;

    const prefillCapacity = workers * options.prefillTokensPerSec;
    const prefillDemand = this.uncachedTotal / elapsedSec;
    const slotCapacity = healthy.reduce((n, w) => n + slotsOf(w, options.defaultSlots), 0);
    const slotDemand = healthy.reduce((n, w) => n + w.inFlight, 0);

    this.evictions.push({ at: now, chars: this.evictedSince });
    this.evictedSince = 0;
    this.evictions = this.evictions.filter((e) => now - e.at < options.cooldownMs);
    const evicted = this.evictions.reduce((n, e) => n + e.chars, 0);
    const held = healthy.reduce((n, w) => n + this.index.size(w.id), 0);
    const capacityChars = healthy.reduce(
      (n, w) => n + (w.signals.lastCapacity ?? 0) * DEFAULT_CHARS_PER_TOKEN,
      0,
    );
    const workingSet = held + evicted;

    const prefillRatio = ratio(prefillDemand, prefillCapacity);
    const slotRatio = ratio(slotDemand, slotCapacity);
    const cacheRatio = capacityChars > 0 ? workingSet / capacityChars : null;

    const desired = new Map<string, { desired: number; raw: number; workers: number }>();
    const fleetRaw = rawDesired(workers, Math.max(prefillRatio, slotRatio), options);
    desired.set(FLEET, { raw: fleetRaw, workers, desired: this.cooled(FLEET, fleetRaw, now) });
    for (const [model, demand] of this.uncachedByModel) {
      if (model === FLEET) continue;
      const serving = healthy.filter((w) => w.servedModels?.has(model) ?? true);
      const n = serving.length;
      const modelPrefill = ratio(
        demand.uncachedTokens / elapsedSec,
        n * options.prefillTokensPerSec,
      );
      const modelSlots = ratio(
        serving.reduce((s, w) => s + w.inFlight, 0),
        serving.reduce((s, w) => s + slotsOf(w, options.defaultSlots), 0),
      );
      const raw = rawDesired(n, Math.max(modelPrefill, modelSlots), options);
      desired.set(model, { raw, workers: n, desired: this.cooled(model, raw, now) });
      demand.uncachedTokens = 0;
    }
    this.uncachedTotal = 0;

    const computeShort = Math.max(prefillRatio, slotRatio) >= options.targetUtilization;
    const cacheShort = cacheRatio !== null && cacheRatio > 1;
    this.reading = {
      at: now,
      workers,
      prefill: {
        demandPerSec: prefillDemand,
        capacityPerSec: prefillCapacity,
        ratio: prefillRatio,
      },
      slots: { demand: slotDemand, capacity: slotCapacity, ratio: slotRatio },
      cache: { workingSetChars: workingSet, capacityChars, ratio: cacheRatio },
      desired,
      shortOf:
        computeShort && cacheShort
          ? "compute_and_cache"
          : computeShort
            ? "compute"
            : cacheShort
              ? "cache"
              : "nothing",
    };
    return this.reading;
  }

  /** The largest raw value over the cool-down window: rises at once, falls after it. */
  private cooled(model: string, raw: number, now: number): number {
    const kept = (this.history.get(model) ?? []).filter(
      (h) => now - h.at < this.options.cooldownMs,
    );
    kept.push({ at: now, raw });
    this.history.set(model, kept);
    return kept.reduce((m, h) => Math.max(m, h.raw), 0);
  }

  get last(): CapacityReading | undefined {
    return this.reading;
  }

  /**
   * Scale-in advice: the healthy workers ordered so that draining the first loses the least
   * cache: the fewest requests routed to what it holds (`hits` over the window), then the least
   * held. `hits` is the cache account's per-worker count of cached tokens.
   */
  drainOrder(
    hits: ReadonlyMap<string, number>,
  ): { id: string; url: string; held_chars: number; cached_tokens_served: number }[] {
    return this.registry
      .list()
      .filter((w) => w.healthy && !w.removed)
      .map((w) => ({
        id: w.id,
        url: w.url,
        held_chars: this.index.size(w.id),
        cached_tokens_served: hits.get(w.id) ?? 0,
      }))
      .sort(
        (a, b) => a.cached_tokens_served - b.cached_tokens_served || a.held_chars - b.held_chars,
      );
  }

  /** The gauges, read from the last sample (radixgate_fleet_*). */
  register(metrics: Registry): void {
    const self = this;
    new Gauge({
      name: "radixgate_fleet_saturation_ratio",
      help: "Demand over capacity of the fleet's healthy workers, by resource: uncached prefill tokens a second over the assumed prefill throughput (prefill_tokens), requests in flight over their batch sizes (running_slots). See GET /debug/capacity.",
      labelNames: ["resource"],
      registers: [metrics],
      collect() {
        const r = self.last;
        if (r === undefined) return;
        this.set({ resource: "prefill_tokens" }, r.prefill.ratio);
        this.set({ resource: "running_slots" }, r.slots.ratio);
      },
    });
    new Gauge({
      name: "radixgate_fleet_desired_workers",
      help: "Workers the fleet would need to run at the target utilisation (per model; * = the whole fleet): ceil(workers x saturation / target), rising at once, falling only after the cool-down. See docs/kubernetes.md.",
      labelNames: ["model"],
      registers: [metrics],
      collect() {
        const r = self.last;
        if (r === undefined) return;
        this.reset();
        for (const [model, d] of r.desired) this.set({ model }, d.desired);
      },
    });
    new Gauge({
      name: "radixgate_fleet_cache_pressure_ratio",
      help: "The working set the prefix index sees (characters held, plus those evicted over the cool-down window) over the fleet's KV capacity in characters; above 1 the fleet is short of cache, not of compute.",
      registers: [metrics],
      collect() {
        const ratio = self.last?.cache.ratio;
        if (ratio !== undefined && ratio !== null) this.set(ratio);
      },
    });
  }

  start(): void {
    if (this.timer !== undefined || this.options.pollMs <= 0) return;
    this.sample();
    this.timer = setInterval(() => this.sample(), this.options.pollMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }
}

/** Admission's batch cap (learned, the operator's, SGLang's), so both count the same slots. */
function slotsOf(worker: Worker, fallback: number): number {
  return fullBatchOf(worker) ?? fallback;
}

function ratio(demand: number, capacity: number): number {
  if (capacity <= 0) return demand > 0 ? Number.POSITIVE_INFINITY : 0;
  return demand / capacity;
}

function rawDesired(workers: number, saturation: number, options: FleetCapacityOptions): number {
  if (!Number.isFinite(saturation)) return Math.max(1, workers + 1);
  // Less a hair, so that exactly the target (2 workers at 0.8 of 0.8) asks for 2, not 3.
  return Math.max(1, Math.ceil((workers * saturation) / options.targetUtilization - 1e-9));
}
