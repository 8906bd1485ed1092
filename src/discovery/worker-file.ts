import { type FSWatcher, unwatchFile, watch, watchFile } from "node:fs";
import { open } from "node:fs/promises";
import { basename, dirname, extname } from "node:path";
import { parse as parseYaml } from "yaml";
import { RouterError } from "../errors.js";
import type { Logger } from "../logger.js";
import type { DiscoveredWorkers } from "./discovered-workers.js";
import { WORKER_SPEC_FIELDS, type WorkerSpec, workerSpecFrom } from "./worker-spec.js";

/** Bounds on a worker file: bytes read, and entries applied. */
export const MAX_WORKER_FILE_BYTES = 1024 * 1024;
export const MAX_WORKER_FILE_ENTRIES = 10_000;
/** Changes closer together than this are read once (editors and tools write in several steps). */
const SETTLE_MS = 50;
/** Stat polling as a fallback where file events do not arrive (network and some container mounts). */
const POLL_MS = 2000;

const ENTRY_EXAMPLE =
  'each entry is a URL string or an object like {"url": "http://10.0.0.1:30000"} (optionally with "api_key", "kv_events_endpoint", "kv_events_replay_endpoint")';

/**
 * --worker-file: a JSON or YAML list of workers (or `{workers: [...]}`), each a URL or an object
 * with the fields of POST /workers. Throws an Error saying what is wrong and where.
 */
export function parseWorkerFile(text: string, path: string): WorkerSpec[] {
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
 * Watches a worker file and applies each good version of it. The directory is watched (tools
 * replace files by renaming a new one over them), with stat polling as a fallback; a bad version
 * (unreadable, too large, not a list of workers) is logged and the last good one stands.
 */
export class WorkerFileSource {
  private watcher: FSWatcher | undefined;
  private settle: NodeJS.Timeout | undefined;
  /** The text last applied, so an event without a change does nothing. */
  private lastText: string | undefined;
  private stopped = false;
  private reading: Promise<void> = Promise.resolve();

  constructor(
    private readonly path: string,
    private readonly workers: DiscoveredWorkers,
    private readonly logger: Logger,
  ) {}

  /**
   * Watches the file, then reads it once (its workers' health checks included). Watching first:
   * a change made while the first version is applied is read after it, not missed.
   */
  async start(): Promise<void> {
    try {
      this.watcher = watch(dirname(this.path), (_event, name) => {
        if (name === null || name === basename(this.path)) this.changed();
      });
      this.watcher.on("error", (err) =>
        this.logger.warn({ path: this.path, err }, "worker file: watch failed; polling only"),
      );
    } catch (err) {
      this.logger.warn({ path: this.path, err }, "worker file: cannot watch; polling only");
    }
    watchFile(this.path, { interval: POLL_MS, persistent: false }, () => this.changed());
    await this.reload();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.settle);
    this.watcher?.close();
    unwatchFile(this.path);
  }

  /** Reads and applies the file now (also what a change event leads to). */
  reload(): Promise<void> {
    const next = this.reading.then(() => this.readAndApply());
    this.reading = next.catch(() => {});
    return next;
  }

  private changed(): void {
    if (this.stopped) return;
    clearTimeout(this.settle);
    this.settle = setTimeout(() => void this.reload(), SETTLE_MS);
    this.settle.unref();
  }

  private async readAndApply(): Promise<void> {
    if (this.stopped) return;
    let text: string;
    let specs: WorkerSpec[];
    try {
      text = await readBounded(this.path);
      if (text === this.lastText) return;
      specs = parseWorkerFile(text, this.path);
    } catch (err) {
      this.logger.error(
        { path: this.path, reason: (err as Error).message },
        "worker file ignored: the last good version stands",
      );
      return;
    }
    this.lastText = text;
    this.logger.info({ path: this.path, workers: specs.length }, "worker file applied");
    await this.workers.apply(specs);
  }
}

async function readBounded(path: string): Promise<string> {
  const file = await open(path, "r");
  try {
    const buffer = Buffer.alloc(MAX_WORKER_FILE_BYTES + 1);
    let length = 0;
    while (length < buffer.length) {
      const { bytesRead } = await file.read(buffer, length, buffer.length - length, length);
      if (bytesRead === 0) break;
      length += bytesRead;
    }
    if (length > MAX_WORKER_FILE_BYTES) {
      throw new Error(`larger than ${MAX_WORKER_FILE_BYTES} bytes`);
    }
    return buffer.subarray(0, length).toString("utf8");
  } finally {
    await file.close();
  }
}
