import type { Config } from "./config.js";
import { ConfigError } from "./errors.js";
import type { Policy, PolicyName } from "./policies/policy.js";
import { SchedulerConfigError } from "./scheduling/config-path.js";
import { createPolicy } from "./scheduling/policy-factory.js";
import { loadSchedulerConfig } from "./scheduling/scheduler-config.js";

/**
 * The router's policy: the first profile of --scheduler-config when one is given (GIE's
 * single-profile-handler), otherwise --policy with its options (a built-in policy or profile).
 * @throws ConfigError naming --scheduler-config and the path in the file.
 */
export function routerPolicy(config: Config): Policy {
  if (config.schedulerConfig !== "") {
    try {
      return loadSchedulerConfig(config.schedulerConfig)[0]!;
    } catch (err) {
      if (err instanceof SchedulerConfigError) {
        throw new ConfigError("--scheduler-config", err.message);
      }
      throw err;
    }
  }
  return namedPolicy(config, config.policy);
}

/** A built-in policy by name, with the router's policy options (the sides of a PD pair). */
export function namedPolicy(config: Config, name: PolicyName): Policy {
  return createPolicy(name, {
    cacheThreshold: config.cacheThreshold,
    balanceAbsThreshold: config.balanceAbsThreshold,
    balanceRelThreshold: config.balanceRelThreshold,
    cacheLoadBound: config.cacheLoadBound,
    prefixCostQueueWeight: config.prefixCostQueueWeight,
    prefixCostRequestChars: config.prefixCostRequestChars,
    prefixCostTieBreak: config.prefixCostTieBreak,
  });
}
