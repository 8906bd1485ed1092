import { describe, expect, it } from "vitest";
import {
  createPolicy,
  isPolicyName,
  POLICY_DEFAULTS,
  type PolicyOptions,
} from "../../src/scheduling/builtin-profiles.js";
import { POLICY_NAMES, type PolicyName } from "../../src/scheduling/policy.js";
import { fleet, selectWith } from "./fake-worker.js";

describe("createPolicy", () => {
  it.each(POLICY_NAMES)("constructs %s with default options", (name) => {
    const policy = createPolicy(name);
    expect(policy.name).toBe(name);
    expect(selectWith(policy, fleet(2), { text: "hi" })).toBeDefined();
  });

  it("uses the SGLang router's defaults, plus a load bound of 2, and prefix_cost's weights", () => {
    expect(POLICY_DEFAULTS).toEqual({
      cacheThreshold: 0.3,
      balanceAbsThreshold: 64,
      balanceRelThreshold: 1.5,
      cacheLoadBound: 2,
      prefixCostQueueWeight: 0.5,
      prefixCostRequestChars: 256,
      prefixCostEvictionWeight: 2,
    });
  });

  it("rejects a cacheLoadBound between 0 and 1", () => {
    expect(() => createPolicy("cache_aware", { cacheLoadBound: 0.5 })).toThrow(/^cacheLoadBound/);
    expect(() => createPolicy("cache_aware", { cacheLoadBound: 0 })).not.toThrow();
    expect(() => createPolicy("cache_aware", { cacheLoadBound: 1 })).not.toThrow();
  });

  it("accepts the edges of every range", () => {
    for (const name of POLICY_NAMES) {
      expect(() =>
        createPolicy(name, { cacheThreshold: 0, balanceAbsThreshold: 0, balanceRelThreshold: 1 }),
      ).not.toThrow();
      expect(() => createPolicy(name, { cacheThreshold: 1 })).not.toThrow();
    }
  });

  it("passes the thresholds to cache_aware", () => {
    // 2 of 10 chars match on the busier worker: below the default 0.3, above a 0.1 threshold.
    const decide = (options: PolicyOptions) => {
      const workers = fleet(2, [0, 1]);
      workers[1]!.tree.insert("abXXXXXXXX");
      const decision = selectWith(createPolicy("cache_aware", options), workers, {
        text: "abYYYYYYYY",
      })!;
      return [decision.worker.id, decision.branch];
    };
    expect(decide({})).toEqual(["w0", "cache_miss"]);
    expect(decide({ cacheThreshold: 0.1 })).toEqual(["w1", "cache_hit"]);
  });

  it("passes the random source to random and power_of_two", () => {
    const workers = fleet(3);
    expect(
      selectWith(createPolicy("random", { random: () => 0.7 }), workers, { text: "" })!.worker,
    ).toBe(workers[2]);
    expect(
      selectWith(createPolicy("power_of_two", { random: () => 0.7 }), workers, { text: "" })!
        .worker,
    ).toBe(workers[2]);
  });

  const bad: [string, Record<string, unknown>][] = [
    ["cacheThreshold", { cacheThreshold: -0.1 }],
    ["cacheThreshold", { cacheThreshold: 1.01 }],
    ["cacheThreshold", { cacheThreshold: Number.NaN }],
    ["cacheThreshold", { cacheThreshold: "0.5" }],
    ["balanceAbsThreshold", { balanceAbsThreshold: -1 }],
    ["balanceAbsThreshold", { balanceAbsThreshold: Number.POSITIVE_INFINITY }],
    ["balanceRelThreshold", { balanceRelThreshold: 0.99 }],
    ["balanceRelThreshold", { balanceRelThreshold: Number.NaN }],
  ];
  it.each(bad)("rejects a bad %s with a RangeError naming it (%o)", (option, options) => {
    for (const name of POLICY_NAMES) {
      expect(() => createPolicy(name, options)).toThrow(RangeError);
      expect(() => createPolicy(name, options)).toThrow(new RegExp(`^${option} must be`));
    }
  });

  it("rejects a random source that is not a function", () => {
    expect(() => createPolicy("random", { random: 0.5 as unknown as () => number })).toThrow(
      /random must be a function/,
    );
  });

  it("rejects an unknown policy name with a RangeError listing the known ones", () => {
    expect(() => createPolicy("fastest" as PolicyName)).toThrow(RangeError);
    expect(() => createPolicy("fastest" as PolicyName)).toThrow(
      /unknown policy "fastest".*cache_aware/,
    );
  });
});

describe("isPolicyName", () => {
  it("accepts exactly the known names", () => {
    for (const name of POLICY_NAMES) expect(isPolicyName(name)).toBe(true);
    expect(isPolicyName("Cache_Aware")).toBe(false);
    expect(isPolicyName("")).toBe(false);
  });
});
