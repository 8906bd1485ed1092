import { describe, expect, it } from "vitest";
import { defaultConfig } from "../../src/config.js";
import { createPolicy } from "../../src/scheduling/builtin-profiles.js";
import { resolvePolicyOptions } from "../../src/scheduling/options.js";

describe("policy settings (issue 21: every default exists once)", () => {
  it("the flags' defaults are the policies' own defaults, field for field", () => {
    const { policy: _policy, ...fromFlags } = defaultConfig().policies;
    const { random: _random, ...policyDefaults } = resolvePolicyOptions({});
    // Fails if a default is written again in the settings rows and the two drift apart.
    expect(fromFlags).toEqual(policyDefaults);
  });

  it("the default policy builds from the default settings", () => {
    const { policy, ...options } = defaultConfig().policies;
    expect(createPolicy(policy, options).name).toBe(policy);
  });
});
