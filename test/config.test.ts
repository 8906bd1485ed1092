import { describe, expect, it } from "vitest";
import { settingsTable, sglangFlagsTable } from "../scripts/config-docs.js";
import { configFromArgv as nestedFromArgv } from "../src/cli-options.js";
import {
  envName,
  flagValues,
  defaultConfig as nestedDefaults,
  parseConfig as parseNested,
  type RawValues,
  SETTINGS,
} from "../src/config.js";
import { ConfigError } from "../src/errors.js";
import { relayMode } from "../src/state/settings.js";

// The configuration by setting name, in the flags' units (Config itself is nested by feature).
const configFromArgv = (argv: string[]) => flagValues(nestedFromArgv(argv));
const parseConfig = (raw: RawValues) => flagValues(parseNested(raw));
const defaultConfig = () => flagValues(nestedDefaults());

describe("config", () => {
  it("has the SGLang router's defaults, but for the policy (prefix_cost) and learned tree budgets", () => {
    const config = defaultConfig();
    expect(config).toMatchObject({
      host: "0.0.0.0",
      port: 30000,
      // Measured better or equal on every bench:routing workload (docs/benchmarks.md, issue 8).
      policy: "prefix_cost",
      cacheThreshold: 0.3,
      balanceAbsThreshold: 64,
      balanceRelThreshold: 1.5,
      evictionIntervalSecs: 120,
      maxTreeSize: "auto",
      treeCapacityFactor: 1,
      enginePollIntervalSecs: 5,
      workerUrls: [],
    });
  });

  it("--max-tree-size takes auto (any case) or a positive integer", () => {
    expect(configFromArgv(["--max-tree-size", "AUTO"]).maxTreeSize).toBe("auto");
    expect(configFromArgv(["--max-tree-size", "1000"]).maxTreeSize).toBe(1000);
    expect(() => configFromArgv(["--max-tree-size", "automatic"])).toThrow(
      /--max-tree-size must be an integer/,
    );
  });

  it("names env vars RADIXGATE_<FLAG>", () => {
    expect(envName("--worker-urls")).toBe("RADIXGATE_WORKER_URLS");
    expect(envName("--balance-abs-threshold")).toBe("RADIXGATE_BALANCE_ABS_THRESHOLD");
  });

  it.each([
    ["--cache-threshold", ["--cache-threshold", "1.5"]],
    ["--cache-threshold", ["--cache-threshold", "-0.1"]],
    ["--cache-threshold", ["--cache-threshold", "abc"]],
    ["--balance-rel-threshold", ["--balance-rel-threshold", "0.9"]],
    ["--policy", ["--policy", "fastest"]],
    ["--worker-urls", ["--worker-urls", "not a url"]],
    ["--worker-urls", ["--worker-urls", "ftp://10.0.0.1"]],
    ["--port", ["--port", "70000"]],
    ["--max-tree-size", ["--max-tree-size", "0"]],
    ["--prefix-index", ["--prefix-index", "exact"]],
    ["--retry-max-attempts", ["--retry-max-attempts", "1.5"]],
    ["--tree-capacity-factor", ["--tree-capacity-factor", "0"]],
    ["--engine-poll-interval-secs", ["--engine-poll-interval-secs", "-1"]],
    ["--engine-poll-timeout-secs", ["--engine-poll-timeout-secs", "0"]],
  ])("rejects a bad %s with a message naming the flag", (flag, argv) => {
    let error: unknown;
    try {
      configFromArgv(argv);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).flag).toBe(flag);
    expect((error as Error).message.startsWith(flag)).toBe(true);
  });

  it("takes several worker URLs, space- or comma-separated, normalized", () => {
    const config = configFromArgv(["--worker-urls", "http://a:1/", "http://b:2", "--port", "0"]);
    expect(config.workerUrls).toEqual(["http://a:1", "http://b:2"]);
    expect(parseConfig({ workerUrls: "http://a:1,http://b:2" }).workerUrls).toEqual([
      "http://a:1",
      "http://b:2",
    ]);
  });

  it("rejects the same worker listed twice", () => {
    expect(() => parseConfig({ workerUrls: "http://a:1 http://a:1/" })).toThrow(
      /same worker twice/,
    );
  });

  it("reads every flag from its environment variable", () => {
    const saved = { ...process.env };
    try {
      process.env.RADIXGATE_CACHE_THRESHOLD = "0.7";
      process.env.RADIXGATE_WORKER_URLS = "http://w1:8000 http://w2:8000";
      process.env.RADIXGATE_POLICY = "least_load";
      const config = configFromArgv([]);
      expect(config.cacheThreshold).toBe(0.7);
      expect(config.workerUrls).toEqual(["http://w1:8000", "http://w2:8000"]);
      expect(config.policy).toBe("least_load");
      // A flag beats the environment.
      expect(configFromArgv(["--policy", "random"]).policy).toBe("random");
    } finally {
      process.env = saved;
    }
  });

  // Peers send whole client requests to this URL: it must be a plain http(s) origin.
  it("--state-advertise-url takes an http(s) origin without credentials, and refuses anything else", () => {
    expect(
      configFromArgv(["--state-advertise-url", "http://10.0.0.7:8080/"]).stateAdvertiseUrl,
    ).toBe("http://10.0.0.7:8080");
    expect(() => configFromArgv(["--state-advertise-url", "redis://10.0.0.7:6379"])).toThrow(
      /--state-advertise-url must start with http:\/\/ or https:\/\//,
    );
    expect(() => configFromArgv(["--state-advertise-url", "http://u:p@10.0.0.7:8080"])).toThrow(
      /--state-advertise-url must not carry credentials/,
    );
    expect(() => configFromArgv(["--state-advertise-url", "http://10.0.0.7:8080/v1"])).toThrow(
      /--state-advertise-url must be an origin only/,
    );
    expect(() => configFromArgv(["--state-advertise-url", "not a url"])).toThrow(
      /--state-advertise-url must be a URL/,
    );
  });

  it("--state-advertise-url is refused with --data-plane nginx, which asks only for decisions", () => {
    expect(() =>
      configFromArgv(["--data-plane", "nginx", "--state-advertise-url", "http://10.0.0.7:8080"]),
    ).toThrow(
      /--state-advertise-url relaying requests to the leader replica needs --data-plane node/,
    );
  });

  it("--state-relay takes decisions (the default), new-prefixes or all; all and decisions without what they relay through are refused at startup", () => {
    const shared = ["--state-url", "redis://127.0.0.1:6379/0", "--state-secret", "s".repeat(32)];
    const advertised = [...shared, "--state-advertise-url", "http://10.0.0.7:8080"];
    // Not given: decisions, and nothing is asked of a fleet that does not relay.
    expect(configFromArgv(advertised).stateRelay).toBeUndefined();
    expect(relayMode(nestedFromArgv(advertised).state)).toBe("decisions");
    expect(relayMode(nestedFromArgv(shared).state)).toBe("decisions");
    expect(configFromArgv([...advertised, "--state-relay", "new-prefixes"]).stateRelay).toBe(
      "new-prefixes",
    );
    expect(configFromArgv([...advertised, "--state-relay", "all"]).stateRelay).toBe("all");
    expect(() => configFromArgv([...advertised, "--state-relay", "everything"])).toThrow(
      /--state-relay must be one of new-prefixes, all, decisions, got "everything"/,
    );
    expect(configFromArgv([...advertised, "--state-relay", "decisions"]).stateRelay).toBe(
      "decisions",
    );
    expect(() => configFromArgv([...shared, "--state-relay", "decisions"])).toThrow(
      /--state-relay decisions relays every request to the leader and needs --state-advertise-url/,
    );
    expect(() => configFromArgv([...shared, "--state-relay", "all"])).toThrow(
      /--state-relay all relays every request to the leader and needs --state-advertise-url/,
    );
    expect(() =>
      configFromArgv(["--state-advertise-url", "http://10.0.0.7:8080", "--state-relay", "all"]),
    ).toThrow(/--state-relay all .* needs --state-url/);
    expect(() =>
      configFromArgv([...advertised, "--state-claim-timeout-ms", "0", "--state-relay", "all"]),
    ).toThrow(/--state-relay all .* needs claims \(--state-claim-timeout-ms above 0/);
  });

  // Issue 20: without a secret, anyone who can write to Redis could add workers to every replica.
  it("--state-url needs a --state-secret of at least 16 characters, and errors never show it", () => {
    expect(() => configFromArgv(["--state-url", "redis://127.0.0.1:6379/0"])).toThrow(
      /--state-secret is required with --state-url/,
    );
    expect(() =>
      configFromArgv(["--state-url", "redis://h:6379/0", "--state-secret", "short-secret"]),
    ).toThrow(/--state-secret must be at least 16 characters/);
    try {
      configFromArgv(["--state-url", "redis://h:6379/0", "--state-secret", "short-secret"]);
    } catch (err) {
      expect((err as Error).message).not.toContain("short-secret");
    }
    const secret = "0123456789abcdef0123";
    const config = configFromArgv(["--state-url", "redis://h:6379/0", "--state-secret", secret]);
    expect(config.stateSecret).toBe(secret);
    expect(SETTINGS.find((s) => s.key === "stateSecret")?.secret).toBe(true);
  });

  it("docs/configuration.md lists every flag, env var and default, as generated from SETTINGS", async () => {
    const { readFile } = await import("node:fs/promises");
    const doc = await readFile(new URL("../docs/configuration.md", import.meta.url), "utf8");
    // Stale docs fail here: run `npm run docs:config`.
    expect(doc).toContain(settingsTable());
    expect(doc).toContain(sglangFlagsTable());
    for (const s of SETTINGS) expect(doc, s.flag).toContain(`\`${envName(s.flag)}\``);
  });

  it("issue 19: docs/architecture.md's opening describes today's defaults (policy, prefix index)", async () => {
    const { readFile } = await import("node:fs/promises");
    const doc = await readFile(new URL("../docs/architecture.md", import.meta.url), "utf8");
    // The text between the title and the first section.
    const opening = doc.split("\n## ", 1)[0]!;
    const defaults = defaultConfig();
    expect(opening).toContain(`\`${defaults.policy}\``);
    expect(opening).toContain(`\`--prefix-index ${defaults.prefixIndex}\``);
    expect(opening).toMatch(/default/);
  });
});
