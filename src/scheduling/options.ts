/** A source of uniform numbers in [0, 1); Math.random unless a test injects a seeded one. */
export type RandomSource = () => number;

/**
 * How prefix_cost settles near-equal costs (scheduling/prefix-cost.ts): by a hash of the text past
 * its longest held prefix, or in turn (the rotation every policy used before issue 27).
 */
export const TIE_BREAKS = ["hash", "rotation"] as const;
export type TieBreak = (typeof TIE_BREAKS)[number];

/** Options of the policies, as the configuration passes them; every field has a default. */
export interface PolicyOptions {
  /** cache_aware: a worker's match rate must be strictly above this to win on prefix. [0, 1]. */
  readonly cacheThreshold?: number | undefined;
  /** cache_aware: the fleet is imbalanced only if max - min in-flight exceeds this. >= 0. */
  readonly balanceAbsThreshold?: number | undefined;
  /** cache_aware: ... and only if max in-flight exceeds min times this. >= 1. */
  readonly balanceRelThreshold?: number | undefined;
  /**
   * cache_aware: a worker wins on prefix only while its in-flight count is at most this times the
   * candidates' mean in-flight, plus one. 0 = no bound (the SGLang router's behaviour). 0 or >= 1.
   */
  readonly cacheLoadBound?: number | undefined;
  /**
   * prefix_cost: weight of the uncached characters already queued on a worker (its in-flight
   * requests' prefill not yet done) against this request's own uncached characters. >= 0.
   */
  readonly prefixCostQueueWeight?: number | undefined;
  /** prefix_cost: characters of prefill one in-flight request is worth (its decode share). >= 0. */
  readonly prefixCostRequestChars?: number | undefined;
  /**
   * prefix_cost: what each uncached character costs beyond its own prefill on a worker whose cache
   * is full, per unit of fill (the characters it evicts, which their owners recompute). >= 0.
   */
  readonly prefixCostEvictionWeight?: number | undefined;
  /**
   * prefix_cost: characters of prefill a LoRA adapter's load is worth, on a worker whose engine
   * holds the request's adapter unloaded (workers/lora-residency.ts). >= 0; 0 = residency ignored.
   */
  readonly prefixCostLoraLoadChars?: number | undefined;
  /** prefix_cost: how near-equal costs are settled (TIE_BREAKS). */
  readonly prefixCostTieBreak?: TieBreak | undefined;
  /**
   * prefix_cost: a new prefix goes to the worker whose cache churned least, the uncached characters
   * sent there halving every this many decisions (prefix-cost.ts, Churn). >= 0; 0 = off.
   */
  readonly prefixCostChurnHalfLife?: number | undefined;
  /** prefix_hash: the prompt's first tokens hashed onto the ring (--prefix-token-count). >= 1. */
  readonly prefixTokenCount?: number | undefined;
  /** random, power_of_two: the random source (for deterministic tests). */
  readonly random?: RandomSource | undefined;
}

export interface ResolvedPolicyOptions {
  readonly cacheThreshold: number;
  readonly balanceAbsThreshold: number;
  readonly balanceRelThreshold: number;
  readonly cacheLoadBound: number;
  readonly prefixCostQueueWeight: number;
  readonly prefixCostRequestChars: number;
  readonly prefixCostEvictionWeight: number;
  readonly prefixCostLoraLoadChars: number;
  readonly prefixCostTieBreak: TieBreak;
  readonly prefixCostChurnHalfLife: number;
  readonly prefixTokenCount: number;
  readonly random: RandomSource;
}

/**
 * The SGLang router's defaults for its cache-aware policy, plus radixgate's load bound, and the
 * weights of prefix_cost (see scheduling/prefix-cost.ts and docs/benchmarks.md for how they were set).
 */
export const POLICY_DEFAULTS: Readonly<
  Omit<
    ResolvedPolicyOptions,
    | "random"
    | "prefixCostTieBreak"
    | "prefixTokenCount"
    | "prefixCostLoraLoadChars"
    | "prefixCostChurnHalfLife"
  >
> = Object.freeze({
  cacheThreshold: 0.3,
  balanceAbsThreshold: 64,
  balanceRelThreshold: 1.5,
  cacheLoadBound: 2,
  prefixCostQueueWeight: 0.5,
  prefixCostRequestChars: 256,
  prefixCostEvictionWeight: 2,
});

/**
 * prefix_cost's LoRA load in characters of prefill unless configured: about a thousand tokens'
 * prefill, the order of an adapter's swap into a GPU slot (a load from disk costs more).
 */
export const DEFAULT_LORA_LOAD_CHARS = 4096;

/**
 * prefix_cost's churn half-life unless configured: 0, off. In the jittered replay it narrowed the
 * run-to-run spread on average but not in every cell, at 0.5-0.7 points of mean hit rate, and real
 * time under load did not show it (docs/benchmarks.md), so the default stays the lowest cost.
 */
export const DEFAULT_CHURN_HALF_LIFE = 0;

/**
 * The half-life, in decisions, measured when it is turned on: long enough that a tenant's uncached
 * work still counts hundreds of requests later, short enough that a worker's history fades.
 */
export const SUGGESTED_CHURN_HALF_LIFE = 1024;

/** prefix_hash's prompt tokens hashed: SGLang's default (sgl-model-gateway/src/policies/prefix_hash.rs). */
export const DEFAULT_PREFIX_TOKEN_COUNT = 256;

/** prefix_cost's tie-break unless configured (issue 27: hash keeps a tenant's work together). */
export const DEFAULT_TIE_BREAK: TieBreak = "hash";

function checkNumber(
  name: string,
  value: number | undefined,
  fallback: number,
  valid: (v: number) => boolean,
  range: string,
): number {
  if (value === undefined) return fallback;
  if (typeof value !== "number" || !Number.isFinite(value) || !valid(value)) {
    throw new RangeError(`${name} must be a finite number ${range}, got ${String(value)}`);
  }
  return value;
}

/** Fills in defaults and rejects out-of-range values with a RangeError naming the option. */
export function resolvePolicyOptions(options: PolicyOptions = {}): ResolvedPolicyOptions {
  const random = options.random ?? Math.random;
  if (typeof random !== "function") {
    throw new TypeError(`random must be a function returning a number in [0, 1)`);
  }
  return {
    cacheThreshold: checkNumber(
      "cacheThreshold",
      options.cacheThreshold,
      POLICY_DEFAULTS.cacheThreshold,
      (v) => v >= 0 && v <= 1,
      "in [0, 1]",
    ),
    balanceAbsThreshold: checkNumber(
      "balanceAbsThreshold",
      options.balanceAbsThreshold,
      POLICY_DEFAULTS.balanceAbsThreshold,
      (v) => v >= 0,
      ">= 0",
    ),
    balanceRelThreshold: checkNumber(
      "balanceRelThreshold",
      options.balanceRelThreshold,
      POLICY_DEFAULTS.balanceRelThreshold,
      (v) => v >= 1,
      ">= 1",
    ),
    cacheLoadBound: checkNumber(
      "cacheLoadBound",
      options.cacheLoadBound,
      POLICY_DEFAULTS.cacheLoadBound,
      (v) => v === 0 || v >= 1,
      "that is 0 (no bound) or >= 1",
    ),
    prefixCostQueueWeight: checkNumber(
      "prefixCostQueueWeight",
      options.prefixCostQueueWeight,
      POLICY_DEFAULTS.prefixCostQueueWeight,
      (v) => v >= 0,
      ">= 0",
    ),
    prefixCostRequestChars: checkNumber(
      "prefixCostRequestChars",
      options.prefixCostRequestChars,
      POLICY_DEFAULTS.prefixCostRequestChars,
      (v) => v >= 0,
      ">= 0",
    ),
    prefixCostEvictionWeight: checkNumber(
      "prefixCostEvictionWeight",
      options.prefixCostEvictionWeight,
      POLICY_DEFAULTS.prefixCostEvictionWeight,
      (v) => v >= 0,
      ">= 0",
    ),
    prefixCostLoraLoadChars: checkNumber(
      "prefixCostLoraLoadChars",
      options.prefixCostLoraLoadChars,
      DEFAULT_LORA_LOAD_CHARS,
      (v) => v >= 0,
      ">= 0",
    ),
    prefixCostTieBreak: checkTieBreak(options.prefixCostTieBreak),
    prefixCostChurnHalfLife: checkNumber(
      "prefixCostChurnHalfLife",
      options.prefixCostChurnHalfLife,
      DEFAULT_CHURN_HALF_LIFE,
      (v) => v >= 0,
      ">= 0",
    ),
    prefixTokenCount: checkNumber(
      "prefixTokenCount",
      options.prefixTokenCount,
      DEFAULT_PREFIX_TOKEN_COUNT,
      (v) => Number.isInteger(v) && v >= 1,
      "that is an integer >= 1",
    ),
    random,
  };
}

function checkTieBreak(value: TieBreak | undefined): TieBreak {
  if (value === undefined) return DEFAULT_TIE_BREAK;
  if (!(TIE_BREAKS as readonly string[]).includes(value)) {
    throw new RangeError(
      `prefixCostTieBreak must be one of ${TIE_BREAKS.join(", ")}, got ${String(value)}`,
    );
  }
  return value;
}

/** A uniform index in [0, n) for n > 0; a misbehaving source (1, NaN, negative) falls back to 0. */
export function randomIndex(random: RandomSource, n: number): number {
  const index = Math.floor(random() * n);
  return index >= 0 && index < n ? index : 0;
}
