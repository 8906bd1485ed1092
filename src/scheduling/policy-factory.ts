/**
 * A Policy by its --policy name: the policies of src/policies/ and the seed systems' built-in
 * scheduling profiles. It sits in scheduling/, above policies/, because it builds both.
 */

import { CacheAwarePolicy } from "../policies/cache-aware.js";
import { LeastLoadPolicy } from "../policies/least-load.js";
import { type PolicyOptions, resolvePolicyOptions } from "../policies/options.js";
import { POLICY_NAMES, type Policy, type PolicyName } from "../policies/policy.js";
import { PowerOfTwoPolicy } from "../policies/power-of-two.js";
import { PrefixCostPolicy } from "../policies/prefix-cost.js";
import { RandomPolicy } from "../policies/random.js";
import { RoundRobinPolicy } from "../policies/round-robin.js";
import { createBuiltinProfile } from "./builtin-profiles.js";

export { POLICY_DEFAULTS, type PolicyOptions } from "../policies/options.js";

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
