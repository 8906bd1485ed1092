import { Writable } from "node:stream";
import type { LogLevel } from "../../src/logger.js";
import { createLogger, type Logger } from "../../src/logger.js";

/**
 * A logger whose output is kept in memory: `lines` as written (one JSON object each, for checks
 * on the raw text such as "no secret appears") and `entries` parsed, both growing as it logs.
 */
export function captureLogs<Entry = Record<string, unknown>>(
  level: LogLevel = "debug",
): { logger: Logger; lines: string[]; entries: Entry[] } {
  const lines: string[] = [];
  const entries: Entry[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      for (const line of chunk.toString("utf8").split("\n")) {
        if (line === "") continue;
        lines.push(line);
        entries.push(JSON.parse(line) as Entry);
      }
      callback();
    },
  });
  return { logger: createLogger({ level, destination }), lines, entries };
}
