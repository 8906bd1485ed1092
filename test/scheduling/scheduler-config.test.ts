import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import {
  BUILTIN_PROFILE_CONFIGS,
  isBuiltinProfile,
} from "../../src/scheduling/builtin-profiles.js";
import { SchedulerConfigError } from "../../src/scheduling/config-path.js";
import {
  buildProfiles,
  loadSchedulerConfig,
  parseSchedulerConfig,
} from "../../src/scheduling/scheduler-config.js";
import { context, worker } from "./helpers.js";

const EXAMPLES = new URL("../../docs/scheduler/", import.meta.url).pathname;
const env = { random: () => 0.5 };

const valid = () => ({
  plugins: [
    { type: "prefix-cache-scorer", parameters: { blockChars: 64 } },
    { type: "queue-scorer" },
    { type: "kv-cache-utilization-scorer", name: "kv" },
    { type: "max-score-picker" },
  ],
  schedulingProfiles: [
    {
      name: "p",
      plugins: [
        { pluginRef: "prefix-cache-scorer", weight: 3 },
        { pluginRef: "queue-scorer", weight: 2 },
        { pluginRef: "kv", weight: 2 },
        { pluginRef: "max-score-picker" },
      ],
    },
  ],
});

/** The error message building `doc` throws. */
function errorOf(doc: unknown): string {
  try {
    buildProfiles(doc, env);
  } catch (err) {
    expect(err).toBeInstanceOf(SchedulerConfigError);
    return (err as Error).message;
  }
  throw new Error("no error");
}

describe("scheduler config examples (docs/scheduler/)", () => {
  const files = readdirSync(EXAMPLES).filter((f) => f.endsWith(".yaml"));

  it("has one example per seed system, plus the precise + queue + KV profile", () => {
    expect(files.sort()).toEqual(
      [
        ...Object.keys(BUILTIN_PROFILE_CONFIGS).map((n) => `${n}.yaml`),
        "precise-queue-kv.yaml",
      ].sort(),
    );
  });

  it.each(files)("%s loads and routes", (file) => {
    const [profile] = loadSchedulerConfig(join(EXAMPLES, file), () => 0.5);
    expect(profile!.name).toBe(file.replace(/\.yaml$/, ""));
    const ws = [worker("a"), worker("b", { inFlight: 3 })];
    expect(profile!.select(ws, { text: "hello", matched: [0, 5] })).toBeDefined();
  });

  it.each(files.filter((f) => isBuiltinProfile(f.replace(/\.yaml$/, ""))))(
    "%s is the built-in profile of the same name",
    (file) => {
      const name = file.replace(/\.yaml$/, "") as keyof typeof BUILTIN_PROFILE_CONFIGS;
      const {
        apiVersion: _a,
        kind: _k,
        ...doc
      } = parse(readFileSync(join(EXAMPLES, file), "utf8"));
      expect(doc).toEqual(BUILTIN_PROFILE_CONFIGS[name]);
    },
  );
});

describe("scheduler config validation: errors name the path in the file", () => {
  it("accepts a GIE-shaped document, JSON included, weights defaulting to 1", () => {
    const [p] = buildProfiles(valid(), env);
    expect(p!.name).toBe("p");
    const json = parseSchedulerConfig(JSON.stringify(valid()));
    expect(buildProfiles(json, env)[0]!.usesPrefixes).toBe(true);
    const explained = p!.explain([worker("a")], { text: "t", matched: [1] });
    expect(explained.candidates[0]!.scores.kv).toEqual({ score: 1, weight: 2 });
  });

  it.each([
    [
      (d: ReturnType<typeof valid>) => {
        (d.schedulingProfiles[0]!.plugins[2] as { weight: number }).weight = -1;
      },
      "schedulingProfiles[0].plugins[2].weight: must be ≥ 0, got -1",
    ],
    [
      (d: ReturnType<typeof valid>) => {
        (d.schedulingProfiles[0]!.plugins[1] as { weight: unknown }).weight = "2";
      },
      'schedulingProfiles[0].plugins[1].weight: must be a finite number, got "2"',
    ],
    [
      (d: ReturnType<typeof valid>) => {
        d.plugins[1]!.type = "queue-scorrer";
      },
      'plugins[1].type: unknown plugin type "queue-scorrer"',
    ],
    [
      (d: ReturnType<typeof valid>) => {
        d.plugins[0]!.parameters = { blockChar: 64 } as never;
      },
      "plugins[0].parameters.blockChar: unknown key",
    ],
    [
      (d: ReturnType<typeof valid>) => {
        d.plugins[0]!.parameters = { blockChars: 1.5 };
      },
      "plugins[0].parameters.blockChars: must be an integer, got 1.5",
    ],
    [
      (d: ReturnType<typeof valid>) => {
        d.schedulingProfiles[0]!.plugins[0]!.pluginRef = "prefix";
      },
      'schedulingProfiles[0].plugins[0].pluginRef: no plugin named "prefix"',
    ],
    [
      (d: ReturnType<typeof valid>) => {
        (d.schedulingProfiles[0]!.plugins[3] as { weight: number }).weight = 1;
      },
      "schedulingProfiles[0].plugins[3].weight: only scorers take a weight",
    ],
    [
      (d: ReturnType<typeof valid>) => {
        d.plugins.push({ type: "weighted-random-picker" });
        d.schedulingProfiles[0]!.plugins.push({ pluginRef: "weighted-random-picker" });
      },
      "schedulingProfiles[0].plugins[4].pluginRef: a profile takes one picker",
    ],
    [
      (d: ReturnType<typeof valid>) => {
        d.plugins.push({ type: "queue-scorer" });
      },
      'plugins[4].name: "queue-scorer" names two plugins',
    ],
    [
      (d: ReturnType<typeof valid>) => {
        d.schedulingProfiles = [];
      },
      "schedulingProfiles: must list at least one profile",
    ],
    [
      (d: ReturnType<typeof valid>) => {
        (d as { schedulingProfile?: unknown }).schedulingProfile = 1;
      },
      "schedulingProfile: unknown key",
    ],
  ])("%#: %s", (mutate, message) => {
    const doc = valid();
    mutate(doc);
    expect(errorOf(doc)).toContain(message);
  });

  it("refuses a document that is not a mapping, and YAML that does not parse", () => {
    expect(errorOf([1, 2])).toBe("must be a mapping, got a list");
    expect(() => parseSchedulerConfig("plugins: [\n  - type")).toThrow(/not valid YAML or JSON/);
    expect(() => parseSchedulerConfig(`plugins: ${"[".repeat(100_000)}`)).toThrow(
      /line 1: nested deeper than 32 levels/,
    );
  });

  it("names the file first when loading one", () => {
    const dir = mkdtempSync(join(tmpdir(), "radixgate-sched-"));
    const file = join(dir, "bad.yaml");
    writeFileSync(
      file,
      "plugins:\n- type: queue-scorer\nschedulingProfiles:\n- name: x\n  plugins:\n  - pluginRef: queue-scorer\n    weight: -2\n",
    );
    expect(() => loadSchedulerConfig(file)).toThrow(
      `${file}: schedulingProfiles[0].plugins[0].weight: must be ≥ 0, got -2`,
    );
    expect(() => loadSchedulerConfig(join(dir, "missing.yaml"))).toThrow(/cannot be read: ENOENT/);
  });

  it("a profile without a picker uses max-score", () => {
    const doc = valid();
    doc.schedulingProfiles[0]!.plugins.pop();
    const [p] = buildProfiles(doc, env);
    const ws = [worker("a"), worker("b")];
    const d = p!.select(ws, { text: "abc", matched: [0, 3] });
    expect(d).toMatchObject({ worker: ws[1], branch: "max_score" });
    expect(context(ws).candidates).toHaveLength(2);
  });
});
