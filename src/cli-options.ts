import { readFileSync } from "node:fs";
import { Command, Option } from "commander";
import { translateCompatFlags } from "./compat-flags.js";
import { type Config, envName, parseConfig, SETTINGS } from "./config.js";
import { kubernetesWarnings } from "./discovery/kubernetes-settings.js";
import { ConfigError } from "./errors.js";
import { CLUSTER_GROUP_ENV } from "./state/cluster-channel.js";

/** Our own version, from the package.json beside src/ or dist/ (never the caller's npm project). */
function ownVersion(): string {
  try {
    const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"));
    return typeof pkg.version === "string" ? pkg.version : "unknown";
  } catch {
    return "unknown";
  }
}

/** Flags (each also settable as RADIXGATE_<FLAG>) → validated Config. Exits 2 on a bad value. */
function buildProgram(): Command {
  const program = new Command("radixgate")
    .description("Cache-aware request router for SGLang and vLLM fleets.")
    // Errors are reported by the CLI in one line (cli-error.ts), not by commander.
    .configureOutput({ outputError: () => {} })
    .showSuggestionAfterError(false)
    .helpOption("-h, --help", "Show every flag with its default.")
    .version(ownVersion(), "-V, --version")
    .addHelpText(
      "after",
      "\nSGLang router launch flags are accepted too (docs/configuration.md lists each one).",
    );
  for (const s of SETTINGS) {
    const option = new Option(`${s.flag} ${s.arg}`, s.description).env(envName(s.flag));
    if (s.secret || s.default === undefined)
      option.default(undefined, (!s.secret && s.shownDefault) || "none");
    else if (Array.isArray(s.default))
      option.default(undefined, s.default.length > 0 ? s.default.join(" ") : "none");
    else option.default(String(s.default));
    program.addOption(option);
  }
  return program;
}

/** Environment variables that look like ours but name no setting (a typo such as RADIXGATE_POLCY). */
function unknownEnvVars(env: NodeJS.ProcessEnv = process.env): string[] {
  // radixgate-cluster sets its group's id for its processes: ours, though no setting names it.
  const known = new Set([...SETTINGS.map((s) => envName(s.flag)), CLUSTER_GROUP_ENV]);
  return Object.keys(env)
    .filter((name) => name.startsWith("RADIXGATE_") && !known.has(name))
    .sort();
}

export interface ParsedArgv {
  config: Config;
  /** One line each, for the log once the logger exists: ignored SGLang flags, unknown variables. */
  warnings: string[];
}

/**
 * Parses argv (and the environment) into a Config plus warnings; throws ConfigError,
 * UnsupportedFlagError or CommanderError.
 */
export function parseArgv(argv: readonly string[]): ParsedArgv {
  const translated = translateCompatFlags(argv);
  const program = buildProgram().exitOverride();
  program.parse(translated.argv, { from: "user" });
  const opts = program.opts<Record<string, string | string[] | undefined>>();
  const raw: Record<string, string | string[]> = {};
  for (const s of SETTINGS) {
    // Commander names the value after the flag (--eviction-interval → evictionInterval), which
    // is not always the setting's name (evictionIntervalSecs).
    const option = program.options.find((o) => o.long === s.flag);
    const value = opts[option?.attributeName() ?? s.key];
    if (value !== undefined) raw[s.key] = value;
  }
  const warnings = [
    ...translated.warnings,
    ...unknownEnvVars().map(
      (name) => `${name} is not a radixgate setting and is ignored (radixgate --help lists them)`,
    ),
  ];
  const config = parseWithSources(raw, program);
  warnings.push(...kubernetesWarnings({ ...config.kubernetes, ...config.disaggregation }));
  if (config.kvEvents.tokenizerPath !== "" && !config.kvEvents.kvEvents) {
    warnings.push("--tokenizer-path is used only with --kv-events (the precise index); ignored");
  }
  if (
    config.policies.policy === "precise_weighted" &&
    !config.kvEvents.kvEvents &&
    config.scheduling.schedulerConfig === ""
  ) {
    warnings.push(
      "--policy precise_weighted scores the precise index, which needs --kv-events; without it the prefix scorer reads the approximate index",
    );
  }
  return { config, warnings };
}

/**
 * parseConfig, with an error about a value that came from the environment naming the variable
 * (RADIXGATE_POLICY=bogus is fixed in the environment, not on the command line).
 */
function parseWithSources(raw: Record<string, string | string[]>, program: Command): Config {
  try {
    return parseConfig(raw);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    const option = program.options.find((o) => o.long === err.flag);
    if (option === undefined || program.getOptionValueSource(option.attributeName()) !== "env")
      throw err;
    const rest = err.message.startsWith(`${err.flag} `)
      ? err.message.slice(err.flag.length + 1)
      : err.message;
    throw new ConfigError(`${envName(err.flag)} (the environment's ${err.flag})`, rest);
  }
}

/** Parses argv (and the environment) into a Config; throws ConfigError or CommanderError. */
export function configFromArgv(argv: string[]): Config {
  return parseArgv(argv).config;
}
