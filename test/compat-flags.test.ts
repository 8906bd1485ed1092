import { describe, expect, it } from "vitest";
import { parseArgv as parseNested } from "../src/cli-options.js";
import {
  COMPAT_FLAGS,
  SHARED_FLAGS,
  translateCompatFlags,
  UnsupportedFlagError,
} from "../src/compat-flags.js";
import { flagValues, SETTINGS } from "../src/config.js";
import { withoutRadixgateEnv } from "./helpers/clean-env.js";
import { SGLANG_GATEWAY_FLAGS } from "./sglang-gateway-flags.js";

/** parseArgv, with the configuration by setting name in the flags' units. */
function parseArgv(argv: string[]) {
  const parsed = parseNested(argv);
  return { ...parsed, config: flagValues(parsed.config) };
}

/** Runs parseArgv with a clean RADIXGATE_* environment. */
function parse(argv: string[]) {
  return withoutRadixgateEnv(() => parseArgv(argv));
}

describe("SGLang router flag compatibility", () => {
  it("SGLang's --tokenizer-path is ours: used with --kv-events, a warning without", () => {
    const off = parse(["--tokenizer-path", "/models/llama"]);
    expect(off.config.tokenizerPath).toBe("/models/llama");
    expect(off.warnings.join("\n")).toMatch(/--tokenizer-path is used only with --kv-events/);
    const on = parse(["--kv-events", "--tokenizer-path", "/models/llama"]);
    expect(on.warnings.join("\n")).not.toMatch(/tokenizer-path/);
  });

  it("every flag the issue named is accepted (never exit 2 for these)", () => {
    const { config, warnings } = parse([
      "--worker-urls",
      "http://w1:8000",
      "--eviction-interval-secs",
      "60",
      "--retry-max-retries",
      "4",
      "--cb-timeout-duration-secs",
      "45",
      "--cb-success-threshold",
      "3",
      "--prometheus-host",
      "0.0.0.0",
      "--request-id-headers",
      "x-trace-id",
      "X-Request-Id",
      "--dp-aware",
      "--log-dir",
      "/var/log/router",
      "--health-check-endpoint",
      "/ping",
      "--worker-startup-timeout-secs",
      "600",
    ]);
    expect(config.evictionIntervalSecs).toBe(60);
    expect(config.retryMaxAttempts).toBe(4);
    expect(config.cbTimeoutSecs).toBe(45);
    expect(config.cbSuccessThreshold).toBe(3);
    expect(config.requestIdHeaders).toEqual(["x-trace-id", "x-request-id"]);
    expect(config.healthCheckEndpoint).toBe("/ping");
    expect(config.workerUrls).toEqual(["http://w1:8000"]);
    // --dp-aware is a setting now (ranks read from the engines).
    expect(config.dpAware).toBe(true);
    // One warning line per ignored flag, naming it.
    expect(warnings).toHaveLength(3);
    for (const flag of ["--prometheus-host", "--log-dir", "--worker-startup-timeout-secs"])
      expect(warnings.filter((w) => w.startsWith(`${flag} `))).toHaveLength(1);
  });

  it("--disable-retries and --disable-circuit-breaker set our equivalents; --flag=value works", () => {
    const { config } = parse([
      "--disable-retries",
      "--disable-circuit-breaker",
      "--eviction-interval-secs=30",
    ]);
    expect(config.retryMaxAttempts).toBe(1);
    expect(config.cbFailureThreshold).toBe(Number.MAX_SAFE_INTEGER);
    expect(config.evictionIntervalSecs).toBe(30);
  });

  it("regression: --eviction-interval reached the config (commander named its value evictionInterval)", () => {
    expect(parse(["--eviction-interval", "7"]).config.evictionIntervalSecs).toBe(7);
  });

  it("SGLang's log level names and -1 for no concurrency limit are accepted", () => {
    expect(parse(["--log-level", "warning"]).config.logLevel).toBe("warn");
    expect(parse(["--log-level", "critical"]).config.logLevel).toBe("fatal");
    expect(parse(["--max-concurrent-requests", "-1"]).config.maxConcurrentRequests).toBe(0);
  });

  it("an ignored flag's values are consumed, so the next flag still parses", () => {
    const { config, warnings } = parse([
      "--prometheus-duration-buckets",
      "0.1",
      "1",
      "--policy",
      "round_robin",
      "--oracle-password",
      "hunter2",
    ]);
    expect(config.policy).toBe("round_robin");
    expect(warnings).toHaveLength(2);
    // A value can be a password: no warning ever repeats one.
    expect(warnings.join("\n")).not.toContain("hunter2");
  });

  it("--cors-allowed-origins takes several origins (it was ignored); --json-log is a switch; --enable-mesh names --state-url", () => {
    const { config, warnings } = parse([
      "--cors-allowed-origins",
      "http://a.example",
      "https://b.example:8443",
      "--json-log",
      "--policy",
      "round_robin",
    ]);
    expect(config.corsAllowedOrigins).toEqual(["http://a.example", "https://b.example:8443"]);
    expect(config.jsonLog).toBe(true);
    expect(config.policy).toBe("round_robin");
    expect(warnings).toEqual([]);
    expect(() => parse(["--cors-allowed-origins", "a.example/x"])).toThrow(/not an origin/);
    expect(() => parse(["--enable-mesh"])).toThrow(/--state-url/);
  });

  it("issue 25: SGLang's Kubernetes discovery launch line parses (it was refused)", () => {
    const { config, warnings } = parse([
      "--service-discovery",
      "--selector",
      "app=sglang",
      "role=worker",
      "--service-discovery-port",
      "30000",
      "--service-discovery-namespace",
      "llm",
      "--policy",
      "cache_aware",
    ]);
    expect(config.serviceDiscovery).toBe(true);
    expect(config.selector).toEqual(["app=sglang", "role=worker"]);
    expect(config.serviceDiscoveryPort).toBe(30000);
    expect(config.serviceDiscoveryNamespace).toBe("llm");
    expect(warnings).toEqual([]);
    // Without a selector there is nothing to watch: said at start, not silently no workers.
    expect(() => parse(["--service-discovery"])).toThrow(/needs --selector key=value/);
    expect(() => parse(["--service-discovery", "--selector", "app"])).toThrow(
      /--selector "app" is not a label key=value pair/,
    );
    // SGLang ignores a selector without discovery; so do we, with a warning.
    expect(parse(["--selector", "app=sglang"]).warnings).toEqual([
      "--selector is used only with --service-discovery; ignored",
    ]);
  });

  it("issue 25: SGLang's PD discovery launch line parses (--prefill-selector/--decode-selector were refused)", () => {
    const { config, warnings } = parse([
      "--pd-disaggregation",
      "--service-discovery",
      "--prefill-selector",
      "app=sglang",
      "component=prefill",
      "--decode-selector",
      "app=sglang",
      "component=decode",
      "--service-discovery-namespace",
      "inference",
      "--service-discovery-port",
      "8000",
    ]);
    expect(warnings).toEqual([]);
    expect(config.prefillSelector).toEqual(["app=sglang", "component=prefill"]);
    expect(config.decodeSelector).toEqual(["app=sglang", "component=decode"]);
    // Where SGLang would watch nothing and warn, the start stops naming the flag.
    expect(() => parse(["--pd-disaggregation", "--service-discovery"])).toThrow(
      /needs --prefill-selector key=value and --decode-selector/,
    );
    expect(() => parse(["--prefill-selector", "app=sglang"])).toThrow(
      /--prefill-selector needs --pd-disaggregation/,
    );
    // As SGLang without IGW mode: --selector is not used in PD mode.
    expect(
      parse([
        "--pd-disaggregation",
        "--service-discovery",
        "--selector",
        "app=x",
        "--prefill-selector",
        "app=p",
      ]).warnings,
    ).toEqual([expect.stringMatching(/^--selector is not used with disaggregation/)]);
  });

  it("issue 25: SGLang's PD launch flags are settings (repeated --prefill URL [PORT], --decode URL)", () => {
    const { config, warnings } = parse([
      "--pd-disaggregation",
      "--prefill",
      "http://p1:30001",
      "9001",
      "--prefill",
      "http://p2:30002",
      "none",
      "--prefill",
      "http://p3:30003",
      "--decode",
      "http://d1:30011",
      "--decode",
      "http://d2:30012",
      "--prefill-policy",
      "cache_aware",
      "--decode-policy",
      "power_of_two",
    ]);
    expect(warnings).toEqual([]);
    expect(config.pdDisaggregation).toBe(true);
    expect(config.prefill).toEqual([
      { url: "http://p1:30001", bootstrapPort: 9001 },
      { url: "http://p2:30002", bootstrapPort: null },
      { url: "http://p3:30003", bootstrapPort: null },
    ]);
    expect(config.decode).toEqual(["http://d1:30011", "http://d2:30012"]);
    expect(config.prefillPolicy).toBe("cache_aware");
    expect(config.decodePolicy).toBe("power_of_two");
  });

  it("issue 25: a bad PD launch line exits 2 with the reason", () => {
    expect(() => parse(["--prefill", "http://p1:1"])).toThrow(/needs --pd-disaggregation/);
    expect(() => parse(["--pd-disaggregation", "--prefill", "http://p1:1", "x"])).toThrow(
      /URL \[BOOTSTRAP_PORT\]/,
    );
    expect(() =>
      parse(["--pd-disaggregation", "--worker-urls", "http://w:1", "--decode", "http://d:1"]),
    ).toThrow(/--worker-urls/);
    expect(() => parse(["--pd-disaggregation", "--vllm-pd-disaggregation"])).toThrow(
      /two different protocols/,
    );
  });

  it("every shared flag is a real setting and no compat flag shadows one", () => {
    const ours = new Set<string>(SETTINGS.map((s) => s.flag));
    for (const s of SHARED_FLAGS) expect(ours.has(s.flag), s.flag).toBe(true);
    for (const c of COMPAT_FLAGS) {
      expect(ours.has(c.flag), c.flag).toBe(false);
      if (c.ours) expect(ours.has(c.ours), `${c.flag} → ${c.ours}`).toBe(true);
    }
  });
});

/** A value the flag's radixgate counterpart accepts (numbers suit every mapped flag). */
const SAMPLE: Record<string, string> = { "--worker-urls": "http://w1:8000", "--policy": "random" };

describe("issue 19: every flag of SGLang's current model gateway (test/sglang-gateway-flags.ts)", () => {
  const shared = new Map(SHARED_FLAGS.map((s) => [s.flag, s]));
  const compat = new Map(COMPAT_FLAGS.map((c) => [c.flag, c]));
  const settings = new Set<string>(SETTINGS.map((s) => s.flag));

  it.each(SGLANG_GATEWAY_FLAGS.map((f) => [f.flag, f.arity] as const))(
    "%s (%s) is a setting, mapped, ignored with one warning, or refused with a reason",
    (flag, arity) => {
      const values = arity === "none" ? [] : arity === "one" ? [SAMPLE[flag] ?? "7"] : ["7", "8"];
      const argv = [flag, ...values, "--policy", "round_robin"];
      const entry = compat.get(flag);
      if (shared.has(flag)) {
        expect(settings.has(flag), `${flag} must be a radixgate setting`).toBe(true);
        expect(translateCompatFlags(argv)).toEqual({ argv, warnings: [] });
        return;
      }
      expect(entry, `${flag} needs a row in COMPAT_FLAGS or SHARED_FLAGS`).toBeDefined();
      expect(entry!.arity, `${flag}: argparse arity`).toBe(arity);
      if (entry!.unsupported) {
        expect(() => translateCompatFlags(argv)).toThrow(UnsupportedFlagError);
        expect(() => translateCompatFlags(argv)).toThrow(entry!.unsupported);
        return;
      }
      const { argv: out, warnings } = translateCompatFlags(argv);
      // Its values are consumed: the next flag still parses.
      expect(out.slice(-2)).toEqual(["--policy", "round_robin"]);
      if (entry!.ours) {
        expect(warnings).toEqual([]);
        expect(out[0]).toBe(entry!.ours);
        expect(() => parse(argv)).not.toThrow();
      } else {
        expect(out).toEqual(["--policy", "round_robin"]);
        expect(warnings).toHaveLength(1);
        expect(warnings[0]).toMatch(
          new RegExp(`^${flag} \\(SGLang router flag\\) accepted and ignored: `),
        );
      }
    },
  );

  it("has no row for a flag the gateway does not have", () => {
    const current = new Set(SGLANG_GATEWAY_FLAGS.map((f) => f.flag));
    for (const flag of [...shared.keys(), ...compat.keys()])
      expect(current.has(flag), flag).toBe(true);
  });

  it("regression: the warning said 'accepted and ignored: Ignored:'", () => {
    const { warnings } = translateCompatFlags(["--retry-jitter-factor", "0.2", "--log-dir", "/x"]);
    expect(warnings).toHaveLength(2);
    for (const w of warnings) expect(w).not.toMatch(/ignored: ignored/i);
  });

  it("the flags the issue named: mapped where radixgate has the feature", () => {
    const { config, warnings } = parse([
      "--shutdown-grace-period-secs",
      "12",
      "--disable-health-check",
      "--prometheus-duration-buckets",
      "0.1",
      "1",
      "--max-idle-secs",
      "600",
    ]);
    expect(config.shutdownGraceSecs).toBe(12);
    expect(config.healthCheckIntervalSecs).toBe(0);
    expect(warnings.map((w) => w.split(" ")[0])).toEqual([
      "--prometheus-duration-buckets",
      "--max-idle-secs",
    ]);
    expect(() => parse(["--tls-cert-path", "/etc/cert.pem"])).toThrow(/plain HTTP/);
    expect(() => parse(["--jwt-issuer", "https://idp"])).toThrow(/--admin-api-key/);
  });
});

describe("configuration hygiene", () => {
  it("warns once per unknown RADIXGATE_* variable, naming it", () => {
    const saved = { ...process.env };
    try {
      process.env.RADIXGATE_POLCY = "random";
      process.env.RADIXGATE_POLICY = "round_robin";
      const { config, warnings } = parseArgv([]);
      expect(config.policy).toBe("round_robin");
      expect(warnings.filter((w) => w.includes("RADIXGATE_POLCY"))).toHaveLength(1);
      expect(warnings.some((w) => w.includes("RADIXGATE_POLICY "))).toBe(false);
    } finally {
      process.env = saved;
    }
  });

  it("does not warn about the group id radixgate-cluster gives its processes", () => {
    const saved = { ...process.env };
    try {
      process.env.RADIXGATE_CLUSTER_GROUP = "0123abcd";
      expect(parseArgv([]).warnings.filter((w) => w.includes("RADIXGATE_CLUSTER_GROUP"))).toEqual(
        [],
      );
    } finally {
      process.env = saved;
    }
  });

  it.each([
    ["--api-key", "RADIXGATE_API_KEY"],
    ["--admin-api-key", "RADIXGATE_ADMIN_API_KEY"],
    ["--worker-api-key", "RADIXGATE_WORKER_API_KEY"],
  ])("refuses an empty %s (it would silently turn auth off)", (flag, env) => {
    expect(() => parse([flag, ""])).toThrow(new RegExp(`${flag} \\(or ${env}\\) is empty`));
    const saved = { ...process.env };
    try {
      process.env[env] = "";
      expect(() => parseArgv([])).toThrow(/is empty/);
    } finally {
      process.env = saved;
    }
  });
});
