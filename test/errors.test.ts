import { describe, expect, it } from "vitest";
import { UnsupportedFlagError } from "../src/compat-flags.js";
import { ConfigError, UsageError } from "../src/errors.js";
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
