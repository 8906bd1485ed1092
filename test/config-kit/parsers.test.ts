import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  autoOr,
  envName,
  flagValue,
  headerName,
  integer,
  key,
  number,
  SEC,
  seconds,
  secondsToMs,
} from "../../src/config-kit/parsers.js";
import { ConfigError, UsageError } from "../../src/errors.js";

function errorOf(run: () => unknown): ConfigError {
  try {
    run();
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
  throw new Error("no error");
}

describe("config kit parsers", () => {
  it("seconds() turns a duration into milliseconds once, at parse time", () => {
    const parse = seconds(0);
    expect(parse("30", "--x-secs")).toBe(30 * SEC);
    expect(parse("0.1", "--x-secs")).toBe(100);
    expect(parse(" 2.5 ", "--x-secs")).toBe(2500);
    expect(parse("0", "--x-secs")).toBe(0);
    expect(parse.perFlagUnit).toBe(1000);
    expect(number(0).perFlagUnit).toBeUndefined();
  });

  it("seconds() checks its bounds in seconds, as the flag reads, and names the flag", () => {
    const parse = seconds(0, 600, { minExclusive: true });
    for (const bad of ["0", "-1", "601", "abc", "", "1e999"]) {
      const err = errorOf(() => parse(bad, "--dns-timeout-secs"));
      expect(err).toBeInstanceOf(UsageError);
      expect(err.flag).toBe("--dns-timeout-secs");
      expect(err.message).toBe(`--dns-timeout-secs must be a number in [0, 600], got "${bad}"`);
    }
    expect(parse("600", "--dns-timeout-secs")).toBe(600_000);
  });

  it("any whole or decimal number of seconds parses to its milliseconds (property)", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 10_000_000 }), (ms) => {
        const secs = ms / 1000;
        expect(seconds(0)(String(secs), "--t-secs")).toBe(ms);
        expect(secondsToMs(secs)).toBe(ms);
      }),
    );
  });

  it("integer() refuses fractions and out-of-range values with the flag's name first", () => {
    expect(integer(1, 100)("42", "--n")).toBe(42);
    expect(errorOf(() => integer(1, 100)("1.5", "--n")).message).toBe(
      '--n must be an integer in [1, 100], got "1.5"',
    );
    expect(errorOf(() => number(1)("0", "--n")).message).toBe('--n must be a number >= 1, got "0"');
  });

  it("flagValue, key, headerName and autoOr", () => {
    expect(flagValue("yes", "--b")).toBe(true);
    expect(flagValue("0", "--b")).toBe(false);
    expect(errorOf(() => flagValue("maybe", "--b")).flag).toBe("--b");
    expect(errorOf(() => key(" ", "--api-key")).message).toContain(envName("--api-key"));
    expect(headerName("X-Session-Id", "--h")).toBe("x-session-id");
    expect(autoOr(integer(1))("AUTO", "--m")).toBe("auto");
    expect(autoOr(integer(1))("7", "--m")).toBe(7);
    expect(() => autoOr(integer(1))("automatic", "--m")).toThrow(/--m must be an integer/);
  });
});
