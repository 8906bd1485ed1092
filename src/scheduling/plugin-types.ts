import { LoraAffinityScorer, SessionAffinityScorer } from "./affinity-scorers.js";
import { AibrixPrefixPicker } from "./aibrix-picker.js";
import { CacheAwarePicker } from "./cache-aware.js";
import { child, type Parameters, SchedulerConfigError } from "./config-path.js";
import { AvailableFilter, ModelServedFilter, SaturationFilter } from "./filters.js";
import {
  ChwblPicker,
  ConsistentHashingPicker,
  ManualPicker,
  PrefixHashPicker,
} from "./key-pickers.js";
import { ActiveRequestScorer, KvCacheUtilizationScorer, QueueScorer } from "./load-scorers.js";
import {
  DEFAULT_CHURN_HALF_LIFE,
  DEFAULT_LORA_LOAD_CHARS,
  DEFAULT_PREFIX_TOKEN_COUNT,
  DEFAULT_TIE_BREAK,
  POLICY_DEFAULTS,
  TIE_BREAKS,
} from "./options.js";
import { LoadPicker, MaxScorePicker, SoftmaxPicker, WeightedRandomPicker } from "./pickers.js";
import type { Filter, Picker, PluginEnv, Scorer } from "./plugin.js";
import { PrefixCostPicker } from "./prefix-cost.js";
import { DynamoCostScorer, PrefillWorkScorer, PrefixScorer } from "./prefix-scorers.js";

type Make<T> = (name: string, p: Parameters, env: PluginEnv) => T;

/** Every plugin `type` a scheduler config may name, by stage. Parameters are validated here. */
export const FILTER_TYPES: Readonly<Record<string, Make<Filter>>> = {
  "model-filter": (name) => new ModelServedFilter(name),
  "health-filter": (name) => new AvailableFilter(name),
  // GIE's utilization-detector defaults: 5 queued, 0.8 KV-cache usage.
  "saturation-filter": (name, p) =>
    new SaturationFilter(name, {
      queueDepthThreshold: p.number("queueDepthThreshold", 5, { min: 0 }),
      kvCacheUtilThreshold: p.number("kvCacheUtilThreshold", 0.8, { above: 0, max: 1 }),
    }),
};

const prefix: Make<Scorer> = (name, p) =>
  new PrefixScorer(name, p.number("blockChars", 0, { min: 0, integer: true }));

export const SCORER_TYPES: Readonly<Record<string, Make<Scorer>>> = {
  "prefix-cache-scorer": prefix,
  // The same scorer over the precise index (--kv-events): llm-d's precise-prefix-cache-scorer.
  "precise-prefix-cache-scorer": prefix,
  "queue-scorer": (name) => new QueueScorer(name),
  "kv-cache-utilization-scorer": (name) => new KvCacheUtilizationScorer(name),
  // GIE's earlier name for it.
  "kv-cache-scorer": (name) => new KvCacheUtilizationScorer(name),
  "active-request-scorer": (name) => new ActiveRequestScorer(name),
  "session-affinity-scorer": (name) => new SessionAffinityScorer(name),
  "lora-affinity-scorer": (name, p) =>
    new LoraAffinityScorer(
      name,
      p.number("unknownScore", 0.5, { min: 0, max: 1 }),
      p.number("loadScore", 0.5, { min: 0, max: 1 }),
    ),
  "prefill-work-scorer": (name, p) =>
    new PrefillWorkScorer(name, {
      queueWeight: p.number("queueWeight", POLICY_DEFAULTS.prefixCostQueueWeight, { min: 0 }),
      requestChars: p.number("requestChars", POLICY_DEFAULTS.prefixCostRequestChars, { min: 0 }),
      evictionWeight: p.number("evictionWeight", POLICY_DEFAULTS.prefixCostEvictionWeight, {
        min: 0,
      }),
    }),
  "dynamo-cost-scorer": (name, p) =>
    new DynamoCostScorer(name, {
      overlapScoreWeight: p.number("overlapScoreWeight", 1, { min: 0 }),
      blockChars: p.number("blockChars", 64, { min: 1, integer: true }),
    }),
};

export const PICKER_TYPES: Readonly<Record<string, Make<Picker>>> = {
  // The router's own policies (--policy NAME is the profile of one of these alone), with the
  // defaults and ranges of their flags (options.ts, settings.ts).
  "cache-aware-picker": (name, p) => {
    const cacheLoadBound = p.number("cacheLoadBound", POLICY_DEFAULTS.cacheLoadBound, { min: 0 });
    if (cacheLoadBound !== 0 && cacheLoadBound < 1) {
      throw new SchedulerConfigError(
        child(p.path, "cacheLoadBound"),
        `must be 0 (no bound) or ≥ 1, got ${cacheLoadBound}`,
      );
    }
    return new CacheAwarePicker(name, {
      cacheThreshold: p.number("cacheThreshold", POLICY_DEFAULTS.cacheThreshold, {
        min: 0,
        max: 1,
      }),
      balanceAbsThreshold: p.number("balanceAbsThreshold", POLICY_DEFAULTS.balanceAbsThreshold, {
        min: 0,
      }),
      balanceRelThreshold: p.number("balanceRelThreshold", POLICY_DEFAULTS.balanceRelThreshold, {
        min: 1,
      }),
      cacheLoadBound,
    });
  },
  "prefix-cost-picker": (name, p) =>
    new PrefixCostPicker(name, {
      prefixCostQueueWeight: p.number("queueWeight", POLICY_DEFAULTS.prefixCostQueueWeight, {
        min: 0,
      }),
      prefixCostRequestChars: p.number("requestChars", POLICY_DEFAULTS.prefixCostRequestChars, {
        min: 0,
      }),
      prefixCostEvictionWeight: p.number(
        "evictionWeight",
        POLICY_DEFAULTS.prefixCostEvictionWeight,
        { min: 0 },
      ),
      prefixCostLoraLoadChars: p.number("loraLoadChars", DEFAULT_LORA_LOAD_CHARS, {
        min: 0,
      }),
      prefixCostTieBreak: p.oneOf("tieBreak", DEFAULT_TIE_BREAK, TIE_BREAKS),
      prefixCostChurnHalfLife: p.number("churnHalfLife", DEFAULT_CHURN_HALF_LIFE, { min: 0 }),
    }),
  "round-robin-picker": (name, _p, env) => new LoadPicker(name, "round_robin", env.random),
  "random-picker": (name, _p, env) => new LoadPicker(name, "random", env.random),
  "power-of-two-picker": (name, _p, env) => new LoadPicker(name, "power_of_two", env.random),
  "least-load-picker": (name, _p, env) => new LoadPicker(name, "least_load", env.random),
  // SGLang's keyed policies; its defaults (sgl-model-gateway/src/policies/).
  "prefix-hash-picker": (name, p) =>
    new PrefixHashPicker(name, {
      prefixTokenCount: p.number("prefixTokenCount", DEFAULT_PREFIX_TOKEN_COUNT, {
        min: 1,
        integer: true,
      }),
      loadFactor: p.number("loadFactor", 1.25, { min: 1 }),
      replication: p.number("replication", 150, { min: 1, max: 4096, integer: true }),
    }),
  "consistent-hashing-picker": (name, p, env) =>
    new ConsistentHashingPicker(
      name,
      p.number("replication", 150, { min: 1, max: 4096, integer: true }),
      env.random,
    ),
  "manual-picker": (name, p, env) =>
    new ManualPicker(
      name,
      p.number("maxKeys", 100000, { min: 1, max: 100_000_000, integer: true }),
      env.random,
    ),
  "max-score-picker": (name) => new MaxScorePicker(name),
  "weighted-random-picker": (name, _p, env) => new WeightedRandomPicker(name, env.random),
  "softmax-picker": (name, p, env) =>
    new SoftmaxPicker(name, p.number("temperature", 1, { min: 0 }), env.random),
  "aibrix-prefix-picker": (name, p) =>
    new AibrixPrefixPicker(name, {
      imbalanceAbsCount: p.number("imbalanceAbsCount", 8, { min: 0 }),
      stdDevFactor: p.number("stdDevFactor", 1, { min: 0 }),
      blockChars: p.number("blockChars", 128, { min: 1, integer: true }),
    }),
  "chwbl-picker": (name, p) =>
    new ChwblPicker(name, {
      prefixChars: p.number("prefixChars", 100, { min: 1, integer: true }),
      replication: p.number("replication", 256, { min: 1, max: 4096, integer: true }),
      loadFactor: p.number("loadFactor", 1.25, { min: 1 }),
    }),
};

/** GIE plugin types that have no stage here (its profile handler): accepted and ignored. */
export const IGNORED_TYPES: ReadonlySet<string> = new Set(["single-profile-handler"]);

export const ALL_TYPES: readonly string[] = [
  ...Object.keys(FILTER_TYPES),
  ...Object.keys(SCORER_TYPES),
  ...Object.keys(PICKER_TYPES),
  ...IGNORED_TYPES,
];
