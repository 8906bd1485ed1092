import { ConfigError } from "./errors.js";
import { createPolicy } from "./scheduling/builtin-profiles.js";
import { SchedulerConfigError } from "./scheduling/config-path.js";
import type { Policy, PolicyName } from "./scheduling/policy.js";
import { loadSchedulerConfig } from "./scheduling/scheduler-config.js";
import type { PoliciesConfig, SchedulingConfig } from "./scheduling/settings.js";

/**
 * The router's policy: the first profile of --scheduler-config when one is given (GIE's
 * single-profile-handler), otherwise --policy with its options (a built-in policy or profile).
 * @throws ConfigError naming --scheduler-config and the path in the file.
 */
export function routerPolicy(policies: PoliciesConfig, scheduling: SchedulingConfig): Policy {
  if (scheduling.schedulerConfig !== "") {
    try {
      return loadSchedulerConfig(scheduling.schedulerConfig)[0]!;
    } catch (err) {
      if (err instanceof SchedulerConfigError) {
        throw new ConfigError("--scheduler-config", err.message);
      }
      throw err;
    }
  }
  return namedPolicy(policies, policies.policy);
}

/** A built-in policy by name, with the router's policy options (the sides of a PD pair). */
export function namedPolicy(policies: PoliciesConfig, name: PolicyName): Policy {
  const { policy: _policy, ...options } = policies;
  return createPolicy(name, options);
}
