/**
 * Every --policy NAME: a built-in scheduling profile, written as the --scheduler-config document
 * that builds it (docs/scheduler/NAME.yaml shows each; test/scheduling/scheduler-config.test.ts
 * checks they agree and decide alike). The router's own policies are one picker each, whose
 * parameters are the policy flags; the seed systems' algorithms are their published profiles.
 */

import type { CacheAwareOptions } from "./cache-aware.js";
import {
  DEFAULT_CHURN_HALF_LIFE,
  DEFAULT_LORA_LOAD_CHARS,
  DEFAULT_PREFIX_TOKEN_COUNT,
  DEFAULT_TIE_BREAK,
  POLICY_DEFAULTS,
  type PolicyOptions,
  type RandomSource,
  type ResolvedPolicyOptions,
  resolvePolicyOptions,
} from "./options.js";
import { POLICY_NAMES, type Policy, type PolicyName } from "./policy.js";
import type { PrefixCostOptions } from "./prefix-cost.js";
import { SchedulerProfile } from "./profile.js";
import { buildProfiles } from "./scheduler-config.js";

export { POLICY_DEFAULTS, type PolicyOptions } from "./options.js";

/** A --scheduler-config document (scheduler-config.ts reads it). */
export interface SchedulerConfigDocument {
  readonly plugins: readonly {
    readonly type: string;
    readonly name?: string;
    readonly parameters?: Readonly<Record<string, number | string>>;
  }[];
  readonly schedulingProfiles: readonly {
    readonly name: string;
    readonly plugins: readonly { readonly pluginRef: string; readonly weight?: number }[];
  }[];
}

/** A profile of one picker named `type`, with its parameters when it takes any. */
function onePicker(
  name: string,
  type: string,
  parameters?: Record<string, number | string>,
): SchedulerConfigDocument {
  return {
    plugins: [parameters === undefined ? { type } : { type, parameters }],
    schedulingProfiles: [{ name, plugins: [{ pluginRef: type }] }],
  };
}

type OwnOptions = Omit<ResolvedPolicyOptions, "random">;

/** The router's own policies: each the profile of its picker, the policy flags its parameters. */
const OWN_POLICIES = {
  cache_aware: (o: OwnOptions) =>
    onePicker("cache_aware", "cache-aware-picker", {
      cacheThreshold: o.cacheThreshold,
      balanceAbsThreshold: o.balanceAbsThreshold,
      balanceRelThreshold: o.balanceRelThreshold,
      cacheLoadBound: o.cacheLoadBound,
    }),
  prefix_cost: (o: OwnOptions) =>
    onePicker("prefix_cost", "prefix-cost-picker", {
      queueWeight: o.prefixCostQueueWeight,
      requestChars: o.prefixCostRequestChars,
      evictionWeight: o.prefixCostEvictionWeight,
      loraLoadChars: o.prefixCostLoraLoadChars,
      tieBreak: o.prefixCostTieBreak,
      churnHalfLife: o.prefixCostChurnHalfLife,
    }),
  round_robin: () => onePicker("round_robin", "round-robin-picker"),
  random: () => onePicker("random", "random-picker"),
  power_of_two: () => onePicker("power_of_two", "power-of-two-picker"),
  least_load: () => onePicker("least_load", "least-load-picker"),
  // SGLang's keyed policies (key-pickers.ts), with its defaults.
  prefix_hash: (o: OwnOptions) =>
    onePicker("prefix_hash", "prefix-hash-picker", {
      prefixTokenCount: o.prefixTokenCount,
      loadFactor: 1.25,
      replication: 150,
    }),
  consistent_hashing: () =>
    onePicker("consistent_hashing", "consistent-hashing-picker", { replication: 150 }),
  manual: () => onePicker("manual", "manual-picker", { maxKeys: 100000 }),
} satisfies Partial<Record<PolicyName, (o: OwnOptions) => SchedulerConfigDocument>>;

type OwnPolicyName = keyof typeof OWN_POLICIES;

function isOwnPolicy(name: string): name is OwnPolicyName {
  return Object.hasOwn(OWN_POLICIES, name);
}

const DEFAULT_OPTIONS: OwnOptions = {
  ...POLICY_DEFAULTS,
  prefixCostTieBreak: DEFAULT_TIE_BREAK,
  prefixCostLoraLoadChars: DEFAULT_LORA_LOAD_CHARS,
  prefixCostChurnHalfLife: DEFAULT_CHURN_HALF_LIFE,
  prefixTokenCount: DEFAULT_PREFIX_TOKEN_COUNT,
};

/** The seed systems' algorithms as scheduler configs. */
const SEED_PROFILES = {
  // AIBrix prefix-cache router: vllm-project/aibrix pkg/plugins/gateway/algorithms/prefix_cache.go
  // (code defaults: imbalance 8, σ-factor 1), character blocks of 128 (the readme's advice for the
  // character tokenizer). See scheduling/aibrix-picker.ts.
  aibrix_prefix: {
    plugins: [
      {
        type: "aibrix-prefix-picker",
        parameters: { imbalanceAbsCount: 8, stdDevFactor: 1, blockChars: 128 },
      },
    ],
    schedulingProfiles: [
      { name: "aibrix_prefix", plugins: [{ pluginRef: "aibrix-prefix-picker" }] },
    ],
  },
  // GIE / llm-d default profile (gateway-api-inference-extension pkg/epp/config/loader/defaults.go):
  // prefix-cache-scorer 3, queue-scorer 2, kv-cache-utilization-scorer 2, max-score picker; the
  // prefix in blocks of blockSizeTokens 16 × 4 characters (approximateprefix/types.go).
  llmd_approx: {
    plugins: [
      { type: "prefix-cache-scorer", parameters: { blockChars: 64 } },
      { type: "queue-scorer" },
      { type: "kv-cache-utilization-scorer" },
      { type: "max-score-picker" },
    ],
    schedulingProfiles: [
      {
        name: "llmd_approx",
        plugins: [
          { pluginRef: "prefix-cache-scorer", weight: 3 },
          { pluginRef: "queue-scorer", weight: 2 },
          { pluginRef: "kv-cache-utilization-scorer", weight: 2 },
          { pluginRef: "max-score-picker" },
        ],
      },
    ],
  },
  // llm-d precise prefix-cache scoring (llm-d-inference-scheduler
  // deploy/config/epp-precise-prefix-cache-config.yaml; Heimdall's scoring configuration, seed
  // 003): precise prefix 2, KV utilization 1, queue 1, max-score. Precise with --kv-events.
  precise_weighted: {
    plugins: [
      { type: "precise-prefix-cache-scorer" },
      { type: "kv-cache-utilization-scorer" },
      { type: "queue-scorer" },
      { type: "max-score-picker" },
    ],
    schedulingProfiles: [
      {
        name: "precise_weighted",
        plugins: [
          { pluginRef: "precise-prefix-cache-scorer", weight: 2 },
          { pluginRef: "kv-cache-utilization-scorer", weight: 1 },
          { pluginRef: "queue-scorer", weight: 1 },
          { pluginRef: "max-score-picker" },
        ],
      },
    ],
  },
  // KubeAI CHWBL: substratusai/kubeai internal/loadbalancer/balance_chwbl.go; defaults
  // prefixCharLength 100, replication 256, meanLoadFactor 125 (api/k8s/v1/model_types.go).
  chwbl: {
    plugins: [
      {
        type: "chwbl-picker",
        parameters: { prefixChars: 100, replication: 256, loadFactor: 1.25 },
      },
    ],
    schedulingProfiles: [{ name: "chwbl", plugins: [{ pluginRef: "chwbl-picker" }] }],
  },
  // NVIDIA Dynamo KV router: lib/llm/src/kv_router/scheduler.rs; kv_overlap_score_weight 1.0,
  // router_temperature 0 (argmin).
  dynamo_cost: {
    plugins: [
      { type: "dynamo-cost-scorer", parameters: { overlapScoreWeight: 1, blockChars: 64 } },
      { type: "softmax-picker", parameters: { temperature: 0 } },
    ],
    schedulingProfiles: [
      {
        name: "dynamo_cost",
        plugins: [{ pluginRef: "dynamo-cost-scorer", weight: 1 }, { pluginRef: "softmax-picker" }],
      },
    ],
  },
} as const;

/** Every built-in profile's document, with the flags' defaults. */
export const BUILTIN_PROFILE_CONFIGS: Readonly<Record<PolicyName, SchedulerConfigDocument>> = {
  ...SEED_PROFILES,
  ...(Object.fromEntries(
    Object.entries(OWN_POLICIES).map(([name, doc]) => [name, doc(DEFAULT_OPTIONS)]),
  ) as Record<OwnPolicyName, SchedulerConfigDocument>),
};

export type BuiltinProfileName = PolicyName;

export function isBuiltinProfile(name: string): name is PolicyName {
  return Object.hasOwn(BUILTIN_PROFILE_CONFIGS, name);
}

/** True when `name` is one of POLICY_NAMES (for configuration coming in as plain strings). */
export function isPolicyName(name: string): name is PolicyName {
  return (POLICY_NAMES as readonly string[]).includes(name);
}

/** The document --policy NAME runs with these options (the flags' values in its parameters). */
export function builtinConfig(name: PolicyName, options: OwnOptions): SchedulerConfigDocument {
  return isOwnPolicy(name) ? OWN_POLICIES[name](options) : BUILTIN_PROFILE_CONFIGS[name];
}

/**
 * The index each seed system matches prefixes with, when not the router's trees: GIE/llm-d's
 * approximate producer hashes blocks of 16 tokens × 4 characters (approximateprefix/types.go),
 * AIBrix blocks of 128 characters (character tokenizer); index/block-hash-index.ts.
 */
const OWN_INDEX: Partial<Record<PolicyName, { name: "block_hash"; blockChars: number }>> = {
  llmd_approx: { name: "block_hash", blockChars: 64 },
  aibrix_prefix: { name: "block_hash", blockChars: 128 },
};

/** A fresh built-in profile (its own rotation and ring state). */
function builtinProfile(name: PolicyName, options: ResolvedPolicyOptions): SchedulerProfile {
  const profile = buildProfiles(builtinConfig(name, options), { random: options.random })[0]!;
  // The router's own policies keep x-radixgate-route as it always was: their branch names them.
  return profile.with({ prefixIndex: OWN_INDEX[name], labelsRoute: !isOwnPolicy(name) });
}

/**
 * A fresh policy by name. Every option is validated whatever the policy, so a bad value in the
 * configuration is reported even when the chosen policy does not use it.
 * @throws RangeError naming the option (or the unknown policy name).
 */
export function createPolicy(name: PolicyName, options: PolicyOptions = {}): Policy {
  const resolved = resolvePolicyOptions(options);
  if (!isPolicyName(name)) {
    throw new RangeError(
      `unknown policy ${JSON.stringify(name)}; expected one of ${POLICY_NAMES.join(", ")}`,
    );
  }
  return builtinProfile(name, resolved);
}

/** The parts of --policy NAME's profile, for the classes below. */
function partsOf(name: OwnPolicyName, options: Partial<OwnOptions>, random?: RandomSource) {
  const resolved = resolvePolicyOptions({ ...options, random });
  return [name, builtinProfile(name, resolved).parts, { labelsRoute: false }] as const;
}

/*
 * The router's own policies as classes, for code that builds one directly: each is exactly
 * createPolicy(NAME)'s profile.
 */
export class CacheAwarePolicy extends SchedulerProfile {
  constructor(options: CacheAwareOptions) {
    super(...partsOf("cache_aware", options));
  }
}
export class PrefixCostPolicy extends SchedulerProfile {
  constructor(options: PrefixCostOptions) {
    super(...partsOf("prefix_cost", options));
  }
}
export class RoundRobinPolicy extends SchedulerProfile {
  constructor() {
    super(...partsOf("round_robin", {}));
  }
}
export class RandomPolicy extends SchedulerProfile {
  constructor(random: RandomSource) {
    super(...partsOf("random", {}, random));
  }
}
export class PowerOfTwoPolicy extends SchedulerProfile {
  constructor(random: RandomSource) {
    super(...partsOf("power_of_two", {}, random));
  }
}
export class LeastLoadPolicy extends SchedulerProfile {
  constructor() {
    super(...partsOf("least_load", {}));
  }
}
