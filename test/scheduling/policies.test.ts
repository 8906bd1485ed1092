import { createPolicy } from "../../src/scheduling/builtin-profiles.js";
import { POLICY_NAMES } from "../../src/scheduling/policy.js";
import { seededRandom } from "./fake-worker.js";
import { describePolicyConformance } from "./policy.conformance.js";

for (const name of POLICY_NAMES) {
  describePolicyConformance(name, () => createPolicy(name, { random: seededRandom(7) }));
}
