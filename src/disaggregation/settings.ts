/**
 * The flags of prefill/decode disaggregation, as SGLang's router spells them
 * (sgl-project/sglang sgl-model-gateway/bindings/python/src/sglang_router/router_args.py:
 * --pd-disaggregation, --prefill URL [BOOTSTRAP_PORT] (repeatable), --decode URL (repeatable),
 * --prefill-policy, --decode-policy; --vllm-pd-disaggregation as its newer versions have it).
 * This folder owns the rows; src/config.ts places them as Config.disaggregation.
 */
import { flagValue, type Parser } from "../config-kit/parsers.js";
import { section } from "../config-kit/setting.js";
import { ConfigError } from "../errors.js";
import { POLICY_NAMES, type PolicyName } from "../scheduling/policy.js";
import { workerUrl, workerUrls } from "../workers/settings.js";

/** One --prefill entry: the worker and its bootstrap port (null = none). */
export interface PrefillEntry {
  readonly url: string;
  readonly bootstrapPort: number | null;
}

/** The disaggregation part of the router's Config. */
export interface PdConfig {
  /** --pd-disaggregation: SGLang's PD mode (bootstrap fields, both sides at once). */
  pdDisaggregation: boolean;
  /** --vllm-pd-disaggregation: vLLM's P/D (prefill with max_tokens 1, then decode with kv_transfer_params). */
  vllmPdDisaggregation: boolean;
  prefill: PrefillEntry[];
  decode: string[];
  /** "" = --policy. */
  prefillPolicy: PolicyName | "";
  /** "" = --policy when that is a load policy, else least_load. */
  decodePolicy: PolicyName | "";
}

/**
 * `URL [BOOTSTRAP_PORT] URL [BOOTSTRAP_PORT] ...`: repeated --prefill flags arrive as one list
 * (commander concatenates them), and a URL always has "://", a port never does, so the pairs are
 * unambiguous. BOOTSTRAP_PORT is a number or `none`, as in SGLang.
 */
export function parsePrefillEntries(raw: string, flag: string): PrefillEntry[] {
  const out: PrefillEntry[] = [];
  for (const token of raw.split(/[\s,]+/).filter((t) => t !== "")) {
    if (token.includes("://")) {
      out.push({ url: workerUrl(token, flag), bootstrapPort: null });
      continue;
    }
    const last = out[out.length - 1];
    if (last === undefined || last.bootstrapPort !== null || !/^(\d{1,5}|none)$/i.test(token)) {
      throw new ConfigError(
        flag,
        `expects URL [BOOTSTRAP_PORT] (a port number or "none") for each prefill worker, got "${token}"`,
      );
    }
    if (token.toLowerCase() === "none") continue;
    const port = Number(token);
    if (port < 1 || port > 65535) {
      throw new ConfigError(flag, `bootstrap port must be in 1..65535, got ${token}`);
    }
    out[out.length - 1] = { url: last.url, bootstrapPort: port };
  }
  return out;
}

const policyOrEmpty: Parser<PolicyName | ""> = (raw, flag) => {
  if (raw === "" || (POLICY_NAMES as readonly string[]).includes(raw)) return raw as PolicyName;
  throw new ConfigError(flag, `must be one of ${POLICY_NAMES.join(", ")}, got "${raw}"`);
};

export const PD_SETTINGS = section<PdConfig>({
  pdDisaggregation: {
    flag: "--pd-disaggregation",
    arg: "[bool]",
    description:
      "SGLang prefill/decode disaggregation: each request goes to a prefill worker (--prefill) and a decode worker (--decode) at once, with bootstrap_host, bootstrap_port and bootstrap_room added to its JSON; the decode side answers. See docs/disaggregation.md.",
    default: false,
    parse: flagValue,
  },
  vllmPdDisaggregation: {
    flag: "--vllm-pd-disaggregation",
    arg: "[bool]",
    description:
      "vLLM prefill/decode disaggregation (NixlConnector): the prefill worker gets the request with max_tokens 1 and kv_transfer_params asking for a remote decode, then the decode worker gets it with the kv_transfer_params the prefill answered. See docs/disaggregation.md.",
    default: false,
    parse: flagValue,
  },
  prefill: {
    flag: "--prefill",
    arg: "<url_and_port...>",
    description:
      "With disaggregation: a prefill worker and its bootstrap port (a number, or none; SGLang only). Repeat the flag for each worker: --prefill http://p1:30000 8998 --prefill http://p2:30000 none.",
    default: [],
    parse: parsePrefillEntries,
  },
  decode: {
    flag: "--decode",
    arg: "<url...>",
    description:
      "With disaggregation: a decode worker. Repeat the flag for each worker: --decode http://d1:30000 --decode http://d2:30000.",
    default: [],
    parse: workerUrls,
  },
  prefillPolicy: {
    flag: "--prefill-policy",
    arg: "<name>",
    description:
      "With disaggregation: the policy choosing the prefill worker (where the prompt's prefix is cached). Empty = --policy.",
    default: "",
    parse: policyOrEmpty,
  },
  decodePolicy: {
    flag: "--decode-policy",
    arg: "<name>",
    description:
      "With disaggregation: the policy choosing the decode worker. Empty = --policy when that is a load policy (round_robin, random, power_of_two, least_load), else least_load: decode holds no prompt cache worth seeking.",
    default: "",
    parse: policyOrEmpty,
  },
});

/** Checks across the rows: one mode at a time, and both sides given (or added later). */
export function validatePdConfig(config: PdConfig & { workerUrls: readonly string[] }): void {
  if (config.pdDisaggregation && config.vllmPdDisaggregation) {
    throw new ConfigError(
      "--vllm-pd-disaggregation",
      "and --pd-disaggregation are two different protocols; give one",
    );
  }
  const pd = config.pdDisaggregation || config.vllmPdDisaggregation;
  if (!pd && (config.prefill.length > 0 || config.decode.length > 0)) {
    throw new ConfigError(
      config.prefill.length > 0 ? "--prefill" : "--decode",
      "needs --pd-disaggregation (SGLang) or --vllm-pd-disaggregation (vLLM)",
    );
  }
  if (pd && config.workerUrls.length > 0) {
    throw new ConfigError(
      "--worker-urls",
      "cannot be used with disaggregation: list the workers with --prefill and --decode",
    );
  }
  const all = [...config.prefill.map((p) => p.url), ...config.decode];
  if (new Set(all).size !== all.length) {
    throw new ConfigError("--prefill", "and --decode list the same worker twice");
  }
}

/** Whether a disaggregation mode is on. */
export function pdEnabled(config: PdConfig): boolean {
  return config.pdDisaggregation || config.vllmPdDisaggregation;
}

/** Policies that weigh load only, never prefixes: what suits the decode side. */
const LOAD_POLICIES: ReadonlySet<PolicyName> = new Set([
  "round_robin",
  "random",
  "power_of_two",
  "least_load",
]);

/** The prefill side's policy: --prefill-policy, else undefined (the router's own: --policy or --scheduler-config). */
export function prefillPolicyName(config: PdConfig): PolicyName | undefined {
  return config.prefillPolicy === "" ? undefined : config.prefillPolicy;
}

/**
 * The decode side's policy: --decode-policy, else --policy when that weighs load only (as SGLang,
 * where the decode side takes --policy), else least_load: a decode worker's cache holds the
 * sequences it is generating, not prompts worth routing to.
 */
export function decodePolicyName(config: PdConfig & { policy: PolicyName }): PolicyName {
  if (config.decodePolicy !== "") return config.decodePolicy;
  return LOAD_POLICIES.has(config.policy) ? config.policy : "least_load";
}
