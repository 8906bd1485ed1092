import type { RandomSource } from "./options.js";
import type { SchedulerProfile } from "./profile.js";
import { buildProfiles } from "./scheduler-config.js";

/**
 * The seed systems' algorithms as scheduler configs (the same documents docs/scheduler/*.yaml
 * show; test/scheduling/examples.test.ts checks they agree), selectable with --policy NAME.
 */
export const BUILTIN_PROFILE_CONFIGS = {
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

export type BuiltinProfileName = keyof typeof BUILTIN_PROFILE_CONFIGS;

export function isBuiltinProfile(name: string): name is BuiltinProfileName {
  return Object.hasOwn(BUILTIN_PROFILE_CONFIGS, name);
}

/**
 * The index each seed system matches prefixes with, when not the router's trees: GIE/llm-d's
 * approximate producer hashes blocks of 16 tokens × 4 characters (approximateprefix/types.go),
 * AIBrix blocks of 128 characters (character tokenizer); index/block-hash-index.ts.
 */
const OWN_INDEX: Partial<Record<BuiltinProfileName, { name: "block_hash"; blockChars: number }>> = {
  llmd_approx: { name: "block_hash", blockChars: 64 },
  aibrix_prefix: { name: "block_hash", blockChars: 128 },
};

/** A fresh built-in profile (its own rotation and ring state). */
export function createBuiltinProfile(
  name: BuiltinProfileName,
  random: RandomSource,
): SchedulerProfile {
  const profile = buildProfiles(BUILTIN_PROFILE_CONFIGS[name], { random })[0]!;
  const own = OWN_INDEX[name];
  return own === undefined ? profile : profile.withPrefixIndex(own);
}
