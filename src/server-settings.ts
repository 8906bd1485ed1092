/**
 * The router process's own settings: where it listens, the metrics port, the shutdown grace and
 * the log level (server.ts and cli.ts read them).
 */
import {
  flagValue,
  oneOf,
  optionalPort,
  type Parser,
  port,
  SEC,
  seconds,
  text,
} from "./config-kit/parsers.js";
import { section } from "./config-kit/setting.js";
import { ConfigError } from "./errors.js";
import { LOG_LEVELS, type LogLevel } from "./logger.js";

export interface ServerConfig {
  host: string;
  port: number;
  /** --prometheus-port: also serve /metrics there; undefined = only on the main port. */
  prometheusPort: number | undefined;
  shutdownGraceMs: number;
  logLevel: LogLevel;
  /** --json-log: JSON lines even when stdout is a terminal. */
  jsonLog: boolean;
}

/** SGLang's Python log level names, accepted for drop-in launch lines. */
const LOG_LEVEL_ALIASES: Record<string, LogLevel> = { warning: "warn", critical: "fatal" };

const logLevel: Parser<LogLevel> = (raw, flag) =>
  LOG_LEVEL_ALIASES[raw.toLowerCase()] ?? oneOf(LOG_LEVELS)(raw.toLowerCase(), flag);

export const SERVER_SETTINGS = section<ServerConfig>(
  {
    host: {
      flag: "--host",
      arg: "<addr>",
      description: "Address to listen on.",
      default: "0.0.0.0",
      parse: text,
    },
    port: {
      flag: "--port",
      arg: "<port>",
      description: "Port to listen on (0 = any free port).",
      default: 30000,
      parse: port,
    },
    prometheusPort: {
      flag: "--prometheus-port",
      arg: "<port>",
      description: "Also serve /metrics on this port (it is always on the main port too).",
      default: undefined,
      parse: optionalPort,
    },
    shutdownGraceMs: {
      flag: "--shutdown-grace-secs",
      arg: "<secs>",
      description: "On SIGTERM/SIGINT, how long in-flight requests may take to finish.",
      default: 30 * SEC,
      parse: seconds(0),
    },
    logLevel: {
      flag: "--log-level",
      arg: "<level>",
      description: `Log level: ${LOG_LEVELS.join(" | ")} (warning, critical: as warn, fatal).`,
      default: "info",
      parse: logLevel,
    },
    jsonLog: {
      flag: "--json-log",
      arg: "[bool]",
      description:
        "Log JSON lines on a terminal too (they are JSON whenever stdout is not a terminal), as SGLang's gateway's --json-log.",
      default: false,
      parse: flagValue,
    },
  },
  (s) => {
    if (s.prometheusPort !== undefined && s.prometheusPort !== 0 && s.prometheusPort === s.port) {
      throw new ConfigError("--prometheus-port", `must differ from --port (${s.port})`);
    }
  },
);
