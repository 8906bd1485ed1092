/**
 * A Policy by its --policy name: the router's own policies and the seed systems' built-in
 * scheduling profiles.
 */

import { createBuiltinProfile } from "./builtin-profiles.js";
import { CacheAwarePolicy } from "./cache-aware.js";
import { LeastLoadPolicy } from "./least-load.js";
import { type PolicyOptions, resolvePolicyOptions } from "./options.js";
import { POLICY_NAMES, type Policy, type PolicyName } from "./policy.js";
import { PowerOfTwoPolicy } from "./power-of-two.js";
import { PrefixCostPolicy } from "./prefix-cost.js";
import { RandomPolicy } from "./random.js";
import { RoundRobinPolicy } from "./round-robin.js";

export { POLICY_DEFAULTS, type PolicyOptions } from "./options.js";

/** True when `name` is one of POLICY_NAMES (for configuration coming in as plain strings). */
export function isPolicyName(name: string): name is PolicyName {
  return (POLICY_NAMES as readonly string[]).includes(name);
}

/**
 * A fresh policy by name. Every option is validated whatever the policy, so a bad value in the
 * configuration is reported even when the chosen policy does not use it.
 * @throws RangeError naming the option (or the unknown policy name).
 */
export function createPolicy(name: PolicyName, options: PolicyOptions = {}): Policy {
  const resolved = resolvePolicyOptions(options);
  switch (name) {
    case "cache_aware":
      return new CacheAwarePolicy(resolved);
    case "round_robin":
      return new RoundRobinPolicy();
    case "random":
      return new RandomPolicy(resolved.random);
    case "power_of_two":
      return new PowerOfTwoPolicy(resolved.random);
    case "least_load":
      return new LeastLoadPolicy();
    case "prefix_cost":
      return new PrefixCostPolicy(resolved);
    // The seed systems' algorithms as scheduling profiles (this folder).
    case "aibrix_prefix":
    case "llmd_approx":
    case "precise_weighted":
    case "chwbl":
    case "dynamo_cost":
      return createBuiltinProfile(name, resolved.random);
    default: {
      const unknown: never = name;
      throw new RangeError(
        `unknown policy ${JSON.stringify(unknown)}; expected one of ${POLICY_NAMES.join(", ")}`,
      );
    }
  }
}
