import { afterEach, describe, expect, it } from "vitest";
import { parseArgv } from "../src/cli-options.js";

describe("a bad value from the environment", () => {
  afterEach(() => {
    delete process.env.RADIXGATE_POLICY;
  });

  it("names the variable, not only the flag (the fix is in the environment)", () => {
    process.env.RADIXGATE_POLICY = "bogus";
    expect(() => parseArgv([])).toThrow(/^RADIXGATE_POLICY \(the environment's --policy\) must be/);
  });

  it("the same value on the command line names the flag", () => {
    expect(() => parseArgv(["--policy", "bogus"])).toThrow(/^--policy must be/);
  });
});
