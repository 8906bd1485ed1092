import { describe, expect, it } from "vitest";
import { SECTIONS, SETTINGS } from "../../src/config.js";
import { integer, SEC, seconds, text } from "../../src/config-kit/parsers.js";
import { section } from "../../src/config-kit/setting.js";
import {
  checkAll,
  defaultsOf,
  flagRows,
  flagValuesOf,
  parseRaw,
  withFlagValues,
} from "../../src/config-kit/table.js";
import { ConfigError } from "../../src/errors.js";

interface DemoConfig {
  timeoutMs: number;
  retries: number;
  name: string;
}

const DEMO = {
  demo: section<DemoConfig>(
    {
      timeoutMs: {
        flag: "--demo-timeout-secs",
        arg: "<secs>",
        description: "A duration.",
        default: 30 * SEC,
        parse: seconds(0),
      },
      retries: {
        flag: "--demo-retries",
        arg: "<n>",
        description: "A count.",
        default: 3,
        parse: integer(1),
      },
      name: {
        flag: "--demo-name",
        arg: "<s>",
        description: "A text.",
        default: "x",
        parse: text,
        name: "demoLabel",
      },
    },
    (s) => {
      if (s.retries > 5 && s.timeoutMs < SEC) throw new ConfigError("--demo-retries", "too many");
    },
  ),
};

describe("config kit table", () => {
  it("places each row under its feature, keyed by the flag in camelCase unless named", () => {
    expect(flagRows(DEMO).map((r) => [r.section, r.field, r.key])).toEqual([
      ["demo", "timeoutMs", "demoTimeoutSecs"],
      ["demo", "retries", "demoRetries"],
      ["demo", "name", "demoLabel"],
    ]);
  });

  it("defaults are in the feature's unit; the flag rows show them in the flag's", () => {
    expect(defaultsOf(DEMO)).toEqual({ demo: { timeoutMs: 30_000, retries: 3, name: "x" } });
    expect(flagRows(DEMO)[0]?.default).toBe(30);
  });

  it("parses raw values by setting name into the nested options, then runs the feature's check", () => {
    expect(parseRaw(DEMO, { demoTimeoutSecs: "1.5", demoLabel: "y" })).toEqual({
      demo: { timeoutMs: 1500, retries: 3, name: "y" },
    });
    expect(() =>
      checkAll(DEMO, parseRaw(DEMO, { demoTimeoutSecs: "0.5", demoRetries: "9" })),
    ).toThrow(/--demo-retries too many/);
  });

  it("flag values and overrides round-trip through the flags' units", () => {
    const config = withFlagValues(DEMO, defaultsOf(DEMO), { demoTimeoutSecs: 0.25 });
    expect(config.demo.timeoutMs).toBe(250);
    expect(flagValuesOf(DEMO, config)).toEqual({
      demoTimeoutSecs: 0.25,
      demoRetries: 3,
      demoLabel: "x",
    });
    expect(() => withFlagValues(DEMO, config, { demoTimeout: 1 })).toThrow(
      /demoTimeout is not a setting/,
    );
  });

  it("refuses two settings with one name, even in two features (the router's table check below relies on it)", () => {
    const twice = {
      demo: DEMO.demo,
      other: section<{ label: string }>({
        label: {
          flag: "--other-label",
          arg: "<s>",
          description: "Another text under the same name.",
          default: "y",
          parse: text,
          name: "demoLabel",
        },
      }),
    };
    expect(() => flagRows(twice)).toThrow("two settings are named demoLabel");
  });

  it("the router's table: every setting has one name and one flag, and each feature's rows are its own", () => {
    const names = SETTINGS.map((s) => s.key);
    const flags = SETTINGS.map((s) => s.flag);
    expect(new Set(names).size).toBe(names.length);
    expect(new Set(flags).size).toBe(flags.length);
    for (const [feature, s] of Object.entries(SECTIONS)) {
      for (const row of s.rows) {
        expect(SETTINGS.find((r) => r.key === row.key)?.section).toBe(feature);
      }
    }
    // Every duration in seconds is parsed to milliseconds: a `-secs` flag fills an `...Ms` field.
    for (const s of SETTINGS.filter(
      (r) => r.flag.endsWith("-secs") || r.flag === "--eviction-interval",
    )) {
      expect(s.parse.perFlagUnit, s.flag).toBe(1000);
      expect(s.field, s.flag).toMatch(/Ms$/);
    }
  });
});
