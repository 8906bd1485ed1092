/**
 * --policy with the policies' weights, and --scheduler-config (router-policy.ts builds the
 * profile). The defaults are the policies' own (options.ts: POLICY_DEFAULTS, DEFAULT_TIE_BREAK),
 * written once there.
 */
import { integer, number, oneOf, type Parser } from "../config-kit/parsers.js";
import { section } from "../config-kit/setting.js";
import { ConfigError } from "../errors.js";
import { SchedulerConfigError } from "./config-path.js";
import {
  DEFAULT_CHURN_HALF_LIFE,
  DEFAULT_LORA_LOAD_CHARS,
  DEFAULT_PREFIX_TOKEN_COUNT,
  DEFAULT_TIE_BREAK,
  POLICY_DEFAULTS,
  type ResolvedPolicyOptions,
  TIE_BREAKS,
} from "./options.js";
import { POLICY_NAMES, type PolicyName } from "./policy.js";
import { loadSchedulerConfig } from "./scheduler-config.js";

export interface SchedulingConfig {
  /** A file of scheduling profiles ("" = none); its first profile routes. */
  schedulerConfig: string;
  /** A file every routing decision and its outcome are appended to ("" = none). */
  decisionTrace: string;
}

/** A scheduler config file, built once to check it (the router builds it again at start). */
const schedulerConfigFile: Parser<string> = (raw, flag) => {
  if (raw.trim() === "") return "";
  try {
    loadSchedulerConfig(raw);
  } catch (err) {
    if (err instanceof SchedulerConfigError) throw new ConfigError(flag, err.message);
    throw err;
  }
  return raw;
};

export const SCHEDULING_SETTINGS = section<SchedulingConfig>({
  schedulerConfig: {
    flag: "--scheduler-config",
    arg: "<file>",
    description:
      "Scheduling profiles from a YAML or JSON file in the shape of GIE's EndpointPickerConfig (plugins: [{type, name, parameters}], schedulingProfiles: [{name, plugins: [{pluginRef, weight}]}]; docs/scheduling.md); its first profile routes instead of --policy. Checked at start: an error names the path in the file. Empty = none.",
    default: "",
    parse: schedulerConfigFile,
  },
  decisionTrace: {
    flag: "--decision-trace",
    arg: "<file>",
    description:
      "Appends one JSON line per prefix-aware routing decision (a hash of the routing text, never the text; each candidate's held characters, cache fill, in-flight count, queued prefill and the policy's cost; the choice) and one per outcome (the engine's prompt and cached tokens) to this file, so that two runs can be compared decision by decision: npm run trace:explain -- A.jsonl [B.jsonl] (docs/benchmarks.md). Bounded: lines are dropped while 8 MiB are unwritten. Empty = off.",
    default: "",
    parse: (raw) => raw.trim(),
  },
});

/** --policy, and the options createPolicy takes (every one set). */
export type PoliciesConfig = { policy: PolicyName } & Omit<ResolvedPolicyOptions, "random">;

export const POLICIES_SETTINGS = section<PoliciesConfig>(
  {
    policy: {
      flag: "--policy",
      arg: "<name>",
      description: `Routing policy: ${POLICY_NAMES.join(" | ")}. Each is a scheduling profile (docs/scheduling.md; docs/scheduler/NAME.yaml is the same as a --scheduler-config file): aibrix_prefix, llmd_approx, precise_weighted (with --kv-events), chwbl and dynamo_cost are the seed systems' algorithms; prefix_hash, consistent_hashing and manual are SGLang's keyed ones (manual: sticky by the x-smg-routing-key header or the --session-affinity key).`,
      default: "prefix_cost",
      parse: (raw, flag) => {
        if ((POLICY_NAMES as readonly string[]).includes(raw)) return raw as PolicyName;
        // Sticky sessions are often looked for under a policy's name.
        throw new ConfigError(
          flag,
          `must be one of ${POLICY_NAMES.join(", ")}, got "${raw}"; to keep a conversation on one worker with any policy: --session-affinity header|user`,
        );
      },
    },
    cacheThreshold: {
      flag: "--cache-threshold",
      arg: "<0..1>",
      description:
        "cache_aware: route to the best-matching worker when its match rate is above this.",
      default: POLICY_DEFAULTS.cacheThreshold,
      parse: number(0, 1),
    },
    balanceAbsThreshold: {
      flag: "--balance-abs-threshold",
      arg: "<n>",
      description:
        "cache_aware: imbalanced when max - min in-flight exceeds this (and the relative test holds).",
      default: POLICY_DEFAULTS.balanceAbsThreshold,
      parse: number(0),
    },
    balanceRelThreshold: {
      flag: "--balance-rel-threshold",
      arg: "<x>",
      description:
        "cache_aware: imbalanced when max in-flight exceeds min x this (and the absolute test holds).",
      default: POLICY_DEFAULTS.balanceRelThreshold,
      parse: number(1),
    },
    cacheLoadBound: {
      flag: "--cache-load-bound",
      arg: "<x>",
      description:
        "cache_aware: a worker wins on prefix only while its in-flight is at most this x the mean in-flight + 1, so one hot prefix cannot pile onto one worker (0 = no bound, as the SGLang router); prefix_cost with --prefix-cost-queue-weight 0: a worker above it is not chosen. With --state-url: this replica's own in-flight counts.",
      default: POLICY_DEFAULTS.cacheLoadBound,
      parse: (raw, flag) => {
        const value = number(0)(raw, flag);
        if (value !== 0 && value < 1)
          throw new ConfigError(flag, `must be 0 (no bound) or >= 1, got "${raw}"`);
        return value;
      },
    },
    prefixCostQueueWeight: {
      flag: "--prefix-cost-queue-weight",
      arg: "<x>",
      description:
        "prefix_cost: weight of the uncached prompt characters already queued on a worker (in-flight requests without a first byte yet) against this request's own uncached characters (below 1: chunked prefill overlaps them, and leaving a prefix's holder copies the prefix). 0 turns the queue off: then --cache-load-bound caps each worker's load, and 0 with --cache-load-bound 0 is refused.",
      default: POLICY_DEFAULTS.prefixCostQueueWeight,
      parse: number(0),
    },
    prefixCostRequestChars: {
      flag: "--prefix-cost-request-chars",
      arg: "<chars>",
      description:
        "prefix_cost: characters of prefill each in-flight request on a worker counts for (its share of every engine step), so one hot prefix spreads over several workers.",
      default: POLICY_DEFAULTS.prefixCostRequestChars,
      parse: number(0),
    },
    prefixCostEvictionWeight: {
      flag: "--prefix-cost-eviction-weight",
      arg: "<x>",
      description:
        "prefix_cost: on a worker whose cache is full (the prefix index's view: what the router sent there against the engine's learned KV capacity), each uncached character also evicts one cached character that its owners will recompute; this weighs that, times the fill, on top of the character's own prefill. A prefix's holder then keeps it unless another worker's queue is shorter by (1 + weight × fill) times what it holds, so a moment's load difference no longer moves a tenant into a full cache. 0 = off.",
      default: POLICY_DEFAULTS.prefixCostEvictionWeight,
      parse: number(0),
    },
    prefixCostLoraLoadChars: {
      flag: "--prefix-cost-lora-load-chars",
      arg: "<chars>",
      description:
        "prefix_cost: characters of prefill a LoRA adapter's load is worth: added to the cost of a worker whose engine holds the request's adapter listed but not loaded (vLLM's lora_requests_info and the adapters this router sent it, within the engine's slots; docs/scheduling.md, LoRA residency), so requests for an adapter go where it is loaded unless the queue there outweighs a load. 0 = residency ignored.",
      default: DEFAULT_LORA_LOAD_CHARS,
      parse: number(0),
    },
    prefixCostTieBreak: {
      flag: "--prefix-cost-tie-break",
      arg: "<hash|rotation>",
      description:
        "prefix_cost: how near-equal costs are settled when some worker holds part of the text. hash = among the candidates within half of --prefix-cost-request-chars of the lowest cost, the one holding the most of the text, then a hash of the end of that prefix, so near-ties among its holders go to the same worker whatever the load of the moment; rotation = exact ties only, the less loaded, then in turn.",
      default: DEFAULT_TIE_BREAK,
      parse: oneOf(TIE_BREAKS),
    },
    prefixCostChurnHalfLife: {
      flag: "--prefix-cost-churn-half-life",
      arg: "<decisions>",
      description:
        "prefix_cost: a new prefix (every worker holds about as much of the text, such as a shared preamble and no more) goes, among the workers whose prefill work is within its own uncached prefill of the lowest, to the one whose cache churned least: the uncached characters this router sent there, halving every this many decisions. Where a new tenant lands then follows what each cache already hosts, not which worker had one request fewer in flight at that instant, which is what made identical runs' hit rates differ by several points. 0 = off, the default (the lowest cost; near-ties by --prefix-cost-tie-break); 1024 is the value measured (docs/benchmarks.md: narrower spreads on average in the model-time replay, not in every cell, 0.5-0.7 points of mean hit rate less).",
      default: DEFAULT_CHURN_HALF_LIFE,
      parse: number(0),
    },
    prefixTokenCount: {
      flag: "--prefix-token-count",
      arg: "<tokens>",
      description:
        "prefix_hash: the prompt's first tokens hashed onto the consistent ring, as SGLang's --prefix-token-count (4 characters of the routing text each).",
      default: DEFAULT_PREFIX_TOKEN_COUNT,
      parse: integer(1),
    },
  },
  refuseLoadBlindPrefixCost,
);

/**
 * prefix_cost with queue weight 0 and no load cap would not see load at all: the worker holding a
 * prefix takes every request of it however long its queue (one worker took all 256 requests of a
 * multi-tenant run, at 6× the mean latency). Refused; with a cap (--cache-load-bound) it is bounded.
 */
function refuseLoadBlindPrefixCost(c: PoliciesConfig): void {
  if (c.policy === "prefix_cost" && c.prefixCostQueueWeight === 0 && c.cacheLoadBound === 0) {
    throw new ConfigError(
      "--prefix-cost-queue-weight",
      "0 with --cache-load-bound 0 turns load awareness off: every request of a prefix would go to the worker that holds it, however long its queue. Keep a weight above 0 (default 0.5), or set --cache-load-bound 1 or more to cap each worker's in-flight requests",
    );
  }
}
