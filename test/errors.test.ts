import { describe, expect, it } from "vitest";
import { UnsupportedFlagError } from "../src/compat-flags.js";
import { ConfigError, retryAfterSecs, UsageError } from "../src/errors.js";
import { ListenError } from "../src/listen.js";

describe("usage errors", () => {
  it("the config, listen and unsupported-flag errors share one base that names the flag (cli.ts catches that one type)", () => {
    const errors = [
      new ConfigError("--port", "must be an integer"),
      new ListenError("--port", "--port 80: permission denied on 0.0.0.0:80"),
      new UnsupportedFlagError("--pd-disaggregation", "not supported"),
    ];
    for (const err of errors) {
      expect(err).toBeInstanceOf(UsageError);
      expect(err.flag).toMatch(/^--/);
    }
    expect(errors.map((e) => e.message)).toEqual([
      "--port must be an integer",
      "--port 80: permission denied on 0.0.0.0:80",
      "--pd-disaggregation: not supported",
    ]);
    expect(errors.map((e) => e.name)).toEqual([
      "ConfigError",
      "ListenError",
      "UnsupportedFlagError",
    ]);
  });
});

describe("retryAfterSecs: one rule for every Retry-After the router computes", () => {
  it("whole seconds rounded up, at least 1, at most the cap (quotas, the admission queue, cooling workers)", () => {
    expect(retryAfterSecs(0)).toBe(1);
    expect(retryAfterSecs(1)).toBe(1);
    expect(retryAfterSecs(1000)).toBe(1);
    expect(retryAfterSecs(30_001)).toBe(31);
    expect(retryAfterSecs(59_500, 60)).toBe(60);
    expect(retryAfterSecs(600_000, 60)).toBe(60);
    expect(retryAfterSecs(600_000)).toBe(600);
  });
});
