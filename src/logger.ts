import pino, { type DestinationStream, type Logger } from "pino";
import pretty from "pino-pretty";

export type { Logger };

/** pino's levels, the values of --log-level. */
export const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** Paths never written to logs, whatever a caller passes. */
const REDACTED_PATHS = [
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
  "workerApiKey",
  "config.workerApiKey",
  "*.workerApiKey",
  "api_key",
  "*.api_key",
  // --state-secret (config) and the shared state's options (`secret`).
  "stateSecret",
  "*.stateSecret",
  "secret",
  "*.secret",
];

/** Query parameters that carry credentials; their values never reach a log line. */
const SECRET_PARAMS =
  /^(api[-_]?key|key|token|access[-_]?token|auth|authorization|password|secret|signature|sig)$/i;

/**
 * A request path with the values of credential-like query parameters replaced, e.g.
 * `/v1/models?api_key=sk-1` → `/v1/models?api_key=[redacted]`. Some clients put keys there.
 */
function redactPath(path: unknown): unknown {
  if (typeof path !== "string") return path;
  const q = path.indexOf("?");
  if (q < 0) return path;
  const query = path
    .slice(q + 1)
    .split("&")
    .map((pair) => {
      const eq = pair.indexOf("=");
      const rawName = eq < 0 ? pair : pair.slice(0, eq);
      let name = rawName;
      try {
        name = decodeURIComponent(rawName.replace(/\+/g, " "));
      } catch {
        // A malformed escape: judge the raw name.
      }
      return SECRET_PARAMS.test(name.trim()) ? `${rawName}=[redacted]` : pair;
    })
    .join("&");
  return `${path.slice(0, q)}?${query}`;
}

export interface LoggerOptions {
  level: LogLevel;
  /** Where to write; defaults to stdout (human-readable when stdout is a terminal, JSON otherwise). */
  destination?: DestinationStream;
  /** JSON lines on a terminal too (--json-log). */
  json?: boolean;
}

export function createLogger(options: LoggerOptions): Logger {
  const base = {
    level: options.level,
    base: { service: "radixgate" },
    redact: { paths: REDACTED_PATHS, censor: "[redacted]" },
    serializers: { path: redactPath },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  if (options.destination) return pino(base, options.destination);
  if (process.stdout.isTTY && options.json !== true)
    return pino(base, pretty({ colorize: true, translateTime: "SYS:HH:MM:ss.l" }));
  return pino(base, stdoutDestination());
}

/**
 * The logger of the per-request access line: the same destination, level and path serializer
 * (credential-like query values stay masked), without the redaction paths. The access line's
 * fields are fixed by the data plane (ids, route, worker, status, times), none of them a secret,
 * and walking the redaction paths for every request cost about 9 µs a line, a tenth of the
 * router's own CPU time per request (bench:overhead, docs/benchmarks.md).
 */
export function accessLogger(logger: Logger): Logger {
  return logger.child({}, { redact: [] });
}

let stdoutClosed = false;
let stdoutWatched = false;

/** Lines held before a write at once (a burst's lines are still written within its tick). */
const BATCH_CHARS = 64 * 1024;

/**
 * Standard output for the JSON log lines, safe when the reader is gone (`radixgate | head -1`):
 * an EPIPE ends logging instead of failing the process, and nothing is retried, so a SIGTERM
 * still ends it at once. (pino.destination's SonicBoom retries a failed write every 100 ms
 * while flushing at exit, forever when the pipe is closed: the hang of issue 13 item 3.)
 * process.stdout writes pipes synchronously on Linux and handles EAGAIN itself.
 *
 * The lines of one event-loop turn go out in one write: a write is a system call, and the access
 * line of every request was one of the few a request costs (docs/benchmarks.md). They are written
 * before the loop waits again (setImmediate) and at exit, so nothing waits in memory.
 */
let held = "";
let flushScheduled = false;

function flushStdout(): void {
  flushScheduled = false;
  if (held === "") return;
  const text = held;
  held = "";
  if (!stdoutClosed && process.stdout.writable) process.stdout.write(text);
}

function stdoutDestination(): DestinationStream {
  if (!stdoutWatched) {
    stdoutWatched = true;
    process.stdout.on("error", (err: NodeJS.ErrnoException) => {
      if (err.code === "EPIPE") stdoutClosed = true;
      else process.stderr.write(`radixgate: stdout: ${err.message}\n`);
    });
    process.once("exit", flushStdout);
  }
  return {
    write(line: string) {
      held += line;
      if (held.length >= BATCH_CHARS) flushStdout();
      else if (!flushScheduled) {
        flushScheduled = true;
        setImmediate(flushStdout).unref();
      }
    },
  };
}
