import {
  closeSync,
  type FSWatcher,
  openSync,
  readSync,
  unwatchFile,
  watch,
  watchFile,
} from "node:fs";
import { basename, dirname } from "node:path";
import { ConfigError } from "../errors.js";
import type { Logger } from "../logger.js";
import { MAX_QUOTA_FILE_BYTES, parseQuotaFile, type QuotaTable } from "./quota-file.js";

/** Changes closer together than this are read once (editors and tools write in several steps). */
const SETTLE_MS = 50;
/** Stat polling as a fallback where file events do not arrive (network and some container mounts). */
const POLL_MS = 2000;

/**
 * The --tenant-quota file: read once at start (a bad one refuses to start, naming the line and
 * key), then watched as --worker-file is (discovery/worker-file.ts): the directory, since tools
 * replace files by renaming a new one over them, and stat polling as a fallback. A bad version
 * later is logged and the last good one stands.
 */
export class QuotaFileSource {
  private watcher: FSWatcher | undefined;
  private settle: NodeJS.Timeout | undefined;
  private lastText: string;
  private stopped = false;
  readonly initial: QuotaTable;

  constructor(
    private readonly path: string,
    private readonly apply: (table: QuotaTable) => void,
    private readonly logger: Logger,
    private readonly onReload: (outcome: "applied" | "rejected") => void = () => {},
  ) {
    try {
      this.lastText = readBounded(path);
      this.initial = parseQuotaFile(this.lastText, path);
    } catch (err) {
      throw new ConfigError("--tenant-quota", `${path}: ${(err as Error).message}`);
    }
  }

  start(): void {
    try {
      this.watcher = watch(dirname(this.path), { persistent: false }, (_event, name) => {
        if (name === null || name === basename(this.path)) this.changed();
      });
      this.watcher.on("error", (err) =>
        this.logger.warn({ path: this.path, err }, "tenant quota file: watch failed; polling only"),
      );
    } catch (err) {
      this.logger.warn({ path: this.path, err }, "tenant quota file: cannot watch; polling only");
    }
    watchFile(this.path, { interval: POLL_MS, persistent: false }, () => this.changed());
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.settle);
    this.watcher?.close();
    unwatchFile(this.path);
  }

  /** Reads the file now and applies it if it changed and is good (what a change event leads to). */
  reload(): void {
    if (this.stopped) return;
    let text: string;
    let table: QuotaTable;
    try {
      text = readBounded(this.path);
      if (text === this.lastText) return;
      table = parseQuotaFile(text, this.path);
    } catch (err) {
      this.onReload("rejected");
      this.logger.error(
        { path: this.path, reason: (err as Error).message },
        "tenant quota file ignored: the last good version stands",
      );
      return;
    }
    this.lastText = text;
    this.apply(table);
    this.onReload("applied");
    this.logger.info(
      { path: this.path, tenants: table.tenants.size, others: table.others !== undefined },
      "tenant quota file applied",
    );
  }

  private changed(): void {
    if (this.stopped) return;
    clearTimeout(this.settle);
    this.settle = setTimeout(() => this.reload(), SETTLE_MS);
    this.settle.unref();
  }
}

/** The file's text, refused beyond MAX_QUOTA_FILE_BYTES (a small file: read at once). */
function readBounded(path: string): string {
  const fd = openSync(path, "r");
  try {
    const buffer = Buffer.alloc(MAX_QUOTA_FILE_BYTES + 1);
    let length = 0;
    while (length < buffer.length) {
      const read = readSync(fd, buffer, length, buffer.length - length, length);
      if (read === 0) break;
      length += read;
    }
    if (length > MAX_QUOTA_FILE_BYTES) throw new Error(`larger than ${MAX_QUOTA_FILE_BYTES} bytes`);
    return buffer.subarray(0, length).toString("utf8");
  } finally {
    closeSync(fd);
  }
}
