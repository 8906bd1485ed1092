import { Command, Option } from "commander";
import { type Config, envName, parseConfig, SETTINGS } from "./config.js";

/** Flags (each also settable as RADIXGATE_<FLAG>) → validated Config. Exits 2 on a bad value. */
export function buildProgram(): Command {
  const program = new Command("radixgate")
    .description("Cache-aware request router for SGLang and vLLM fleets.")
    .showHelpAfterError("(run radixgate --help for every flag and its default)")
    .helpOption("-h, --help", "Show every flag with its default.")
    .version(process.env.npm_package_version ?? "0.1.0", "-V, --version");
  for (const s of SETTINGS) {
    const option = new Option(`${s.flag} ${s.arg}`, s.description).env(envName(s.flag));
    if (s.secret || s.default === undefined) option.default(undefined, "none");
    else if (Array.isArray(s.default)) option.default(undefined, "none");
    else option.default(String(s.default));
    program.addOption(option);
  }
  return program;
}

/** Parses argv (and the environment) into a Config; throws ConfigError or CommanderError. */
export function configFromArgv(argv: string[]): Config {
  const program = buildProgram().exitOverride();
  program.parse(argv, { from: "user" });
  const opts = program.opts<Record<string, string | string[] | undefined>>();
  const raw: Record<string, string | string[]> = {};
  for (const s of SETTINGS) {
    const value = opts[s.key];
    if (value !== undefined) raw[s.key] = value;
  }
  return parseConfig(raw);
}
