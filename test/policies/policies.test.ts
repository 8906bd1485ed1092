import { createPolicy } from "../../src/policies/factory.js";
import { POLICY_NAMES } from "../../src/policies/policy.js";
import { seededRandom } from "./fake-worker.js";
import { describePolicyConformance } from "./policy.conformance.js";

for (const name of POLICY_NAMES) {
  describePolicyConformance(name, () => createPolicy(name, { random: seededRandom(7) }));
}
