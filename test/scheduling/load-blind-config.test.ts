import { describe, expect, it } from "vitest";
import { configFromArgv } from "../../src/cli-options.js";
import { ConfigError } from "../../src/errors.js";

describe("a prefix_cost setting that would turn off load awareness", () => {
  it("is refused: queue weight 0 with no load cap, naming the flag and what to do", () => {
    const argv = ["--prefix-cost-queue-weight", "0", "--cache-load-bound", "0"];
    expect(() => configFromArgv(argv)).toThrow(ConfigError);
    expect(() => configFromArgv(argv)).toThrow(
      /--prefix-cost-queue-weight.*load awareness off.*--cache-load-bound 1 or more/,
    );
  });

  it("is bounded when a load cap is set (the default --cache-load-bound 2), and other policies are not concerned", () => {
    const capped = configFromArgv(["--prefix-cost-queue-weight", "0"]);
    expect(capped.policies.prefixCostQueueWeight).toBe(0);
    expect(capped.policies.cacheLoadBound).toBe(2);
    const other = ["--policy", "cache_aware", "--prefix-cost-queue-weight", "0"];
    expect(() => configFromArgv([...other, "--cache-load-bound", "0"])).not.toThrow();
  });
});
