import { extname } from "node:path";
import { parse as parseYaml } from "yaml";
import { RouterError } from "../errors.js";
import type { Logger } from "../logger.js";
import { checkNesting } from "../watched-file/nesting.js";
import { WatchedFile } from "../watched-file/watched-file.js";
import type { DiscoveredWorkers } from "./discovered-workers.js";
import { WORKER_SPEC_FIELDS, type WorkerSpec, workerSpecFrom } from "./worker-spec.js";

/** Bounds on a worker file: bytes read, and entries applied. */
export const MAX_WORKER_FILE_BYTES = 1024 * 1024;
export const MAX_WORKER_FILE_ENTRIES = 10_000;
const ENTRY_EXAMPLE =
  'each entry is a URL string or an object like {"url": "http://10.0.0.1:30000"} (optionally with "api_key", "kv_events_endpoint", "kv_events_replay_endpoint")';

/**
 * --worker-file: a JSON or YAML list of workers (or `{workers: [...]}`), each a URL or an object
 * with the fields of POST /workers. Throws an Error saying what is wrong and where.
 */
export function parseWorkerFile(text: string, path: string): WorkerSpec[] {
  checkNesting(text);
  let doc: unknown;
  try {
    doc = extname(path).toLowerCase() === ".json" ? JSON.parse(text) : parseYaml(text);
  } catch (err) {
    throw new Error(
      `not valid ${extname(path) === ".json" ? "JSON" : "YAML"}: ${(err as Error).message}`,
    );
  }
  if (doc === null || doc === undefined) return [];
  const list = Array.isArray(doc)
    ? doc
    : typeof doc === "object" && "workers" in doc
      ? (doc as { workers: unknown }).workers
      : undefined;
  if (!Array.isArray(list)) {
    throw new Error("must be a list of workers, or an object with a `workers` list");
  }
  if (list.length > MAX_WORKER_FILE_ENTRIES) {
    throw new Error(`lists ${list.length} workers, more than ${MAX_WORKER_FILE_ENTRIES}`);
  }
  return list.map((entry, i) => {
    const fields = typeof entry === "string" ? { url: entry } : entry;
    if (fields === null || typeof fields !== "object" || Array.isArray(fields)) {
      throw new Error(`entry ${i + 1}: ${ENTRY_EXAMPLE}`);
    }
    const unknown = Object.keys(fields).find(
      (k) => !(WORKER_SPEC_FIELDS as readonly string[]).includes(k),
    );
    if (unknown !== undefined) {
      throw new Error(`entry ${i + 1}: unknown field "${unknown}" (${ENTRY_EXAMPLE})`);
    }
    try {
      return workerSpecFrom(fields as Record<string, unknown>, ENTRY_EXAMPLE);
    } catch (err) {
      if (err instanceof RouterError) throw new Error(`entry ${i + 1}: ${err.message}`);
      throw err;
    }
  });
}

/**
 * Watches a worker file and applies each good version of it (watched-file/watched-file.ts: the
 * directory watched, stat polling as a fallback); a bad version (unreadable, too large, not a
 * list of workers) is logged and the last good one stands.
 */
export class WorkerFileSource {
  private readonly file: WatchedFile<WorkerSpec[]>;

  constructor(path: string, workers: DiscoveredWorkers, logger: Logger) {
    this.file = new WatchedFile({
      path,
      maxBytes: MAX_WORKER_FILE_BYTES,
      what: "worker file",
      logger,
      parser: { module: import.meta.url, name: parseWorkerFile.name },
      apply: async (specs) => {
        logger.info({ path, workers: specs.length }, "worker file applied");
        await workers.apply(specs);
      },
      rejected: (reason) =>
        logger.error({ path, reason }, "worker file ignored: the last good version stands"),
    });
  }

  /**
   * Watches the file, then reads it once (its workers' health checks included). Watching first:
   * a change made while the first version is applied is read after it, not missed.
   */
  async start(): Promise<void> {
    this.file.watch();
    await this.file.reload();
  }

  stop(): void {
    this.file.stop();
  }

  /** Reads and applies the file now (also what a change event leads to). */
  reload(): Promise<void> {
    return this.file.reload();
  }
}
