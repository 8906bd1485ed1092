import pino, { type DestinationStream, type Logger } from "pino";
import pretty from "pino-pretty";
import type { LogLevel } from "./config.js";

export type { Logger };

/** Paths never written to logs, whatever a caller passes. */
export const REDACTED_PATHS = [
  "apiKey",
  "adminApiKey",
  "config.apiKey",
  "config.adminApiKey",
  "headers.authorization",
  "headers.cookie",
  "req.headers.authorization",
  "req.headers.cookie",
  "*.apiKey",
  "*.adminApiKey",
  "*.authorization",
];

export interface LoggerOptions {
  level: LogLevel;
  /** Where to write; defaults to stdout (human-readable when stdout is a terminal, JSON otherwise). */
  destination?: DestinationStream;
}

export function createLogger(options: LoggerOptions): Logger {
  const base = {
    level: options.level,
    base: { service: "radixgate" },
    redact: { paths: REDACTED_PATHS, censor: "[redacted]" },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  if (options.destination) return pino(base, options.destination);
  if (process.stdout.isTTY)
    return pino(base, pretty({ colorize: true, translateTime: "SYS:HH:MM:ss.l" }));
  return pino(base, pino.destination({ fd: 1, sync: false }));
}
