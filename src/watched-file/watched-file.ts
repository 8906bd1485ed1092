/**
 * A small configuration file the router reads again when it changes (--worker-file,
 * --tenant-quota): the one watch-and-reload mechanism both use. The directory is watched, since
 * tools replace a file by renaming a new one over it (an event on the file itself would stop at
 * the first replacement), with stat polling as a fallback where file events do not arrive
 * (network and some container mounts). Changes close together are read once. A version that
 * cannot be read or parsed is reported and the last good one stands; a version equal to the
 * last one applied does nothing. Parsing runs in a thread that may die alone (isolated-parse.ts).
 */
import {
  closeSync,
  type FSWatcher,
  openSync,
  readSync,
  unwatchFile,
  watch,
  watchFile,
} from "node:fs";
import { open } from "node:fs/promises";
import { basename, dirname } from "node:path";
import type { Logger } from "../logger.js";
import { IsolatedParser, type ParserRef } from "./isolated-parse.js";

/** Changes closer together than this are read once (editors and tools write in several steps). */
const SETTLE_MS = 50;
/** Stat polling as a fallback where file events do not arrive. */
const POLL_MS = 2000;

export interface WatchedFileOptions<T> {
  readonly path: string;
  /** A larger file is refused (a bad version). */
  readonly maxBytes: number;
  /** What the file is, in log lines: "worker file", "tenant quota file". */
  readonly what: string;
  /**
   * Turns the file's text into a value; run in a thread of its own (isolated-parse.ts), so a
   * hostile version can neither stall nor crash the router.
   */
  readonly parser: ParserRef;
  /** A good version that differs from the last one applied. */
  apply(value: T): void | Promise<void>;
  /** A version that could not be read or parsed: the last good one stands. */
  rejected(reason: string): void;
  readonly logger: Logger;
}

export class WatchedFile<T> {
  private watcher: FSWatcher | undefined;
  private settle: NodeJS.Timeout | undefined;
  private stopped = false;
  private readonly parser = new IsolatedParser();
  private firstRead = true;
  /** Reads one after another: a change during an apply is read after it. */
  private reading: Promise<void> = Promise.resolve();

  /** `lastText`: the version already applied (read at start by the owner), if any. */
  constructor(
    private readonly options: WatchedFileOptions<T>,
    private lastText?: string,
  ) {}

  /** Watches the directory and polls the file; a change leads to reload(). */
  watch(): void {
    const { path, logger, what } = this.options;
    try {
      this.watcher = watch(dirname(path), { persistent: false }, (_event, name) => {
        if (name === null || name === basename(path)) this.changed();
      });
      this.watcher.on("error", (err) =>
        logger.warn({ path, err }, `${what}: watch failed; polling only`),
      );
    } catch (err) {
      logger.warn({ path, err }, `${what}: cannot watch; polling only`);
    }
    watchFile(path, { interval: POLL_MS, persistent: false }, () => this.changed());
  }

  stop(): void {
    this.stopped = true;
    this.parser.close();
    clearTimeout(this.settle);
    this.watcher?.close();
    unwatchFile(this.options.path);
  }

  /** Reads the file now and applies it if it changed and is good (what a change leads to). */
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

  /**
   * The first version is parsed in line: it is read at start, before the router says it is
   * listening, and a thread's start would delay the first workers by more than the parse takes.
   * Every later version is parsed in the thread.
   */
  private async parse(text: string): Promise<T> {
    const { parser, path } = this.options;
    const first = this.firstRead;
    this.firstRead = false;
    if (!first || this.lastText !== undefined) return this.parser.parse<T>(parser, text, path);
    const module = (await import(parser.module)) as Record<string, (t: string, p: string) => T>;
    return (module[parser.name] as (t: string, p: string) => T)(text, path);
  }

  private async readAndApply(): Promise<void> {
    if (this.stopped) return;
    const { path, maxBytes } = this.options;
    let text: string;
    let value: T;
    try {
      text = await readBounded(path, maxBytes);
      if (text === this.lastText) return;
      value = await this.parse(text);
    } catch (err) {
      this.options.rejected(shortReason((err as Error).message));
      return;
    }
    this.lastText = text;
    await this.options.apply(value);
  }
}

/** The file's text, refused beyond `maxBytes` (a small file: read at once). */
export async function readBounded(path: string, maxBytes: number): Promise<string> {
  const file = await open(path, "r");
  try {
    const buffer = Buffer.alloc(maxBytes + 1);
    let length = 0;
    while (length < buffer.length) {
      const { bytesRead } = await file.read(buffer, length, buffer.length - length, length);
      if (bytesRead === 0) break;
      length += bytesRead;
    }
    return bounded(buffer, length, maxBytes);
  } finally {
    await file.close();
  }
}

/** readBounded at start, where a bad file refuses to start the router. */
export function readBoundedSync(path: string, maxBytes: number): string {
  const fd = openSync(path, "r");
  try {
    const buffer = Buffer.alloc(maxBytes + 1);
    let length = 0;
    while (length < buffer.length) {
      const read = readSync(fd, buffer, length, buffer.length - length, length);
      if (read === 0) break;
      length += read;
    }
    return bounded(buffer, length, maxBytes);
  } finally {
    closeSync(fd);
  }
}

function bounded(buffer: Buffer, length: number, maxBytes: number): string {
  if (length > maxBytes) throw new Error(`larger than ${maxBytes} bytes`);
  return buffer.subarray(0, length).toString("utf8");
}

/** A parser's complaint as one log-sized line (some quote the offending text). */
function shortReason(message: string): string {
  const first = message.split("\n")[0] as string;
  return first.length > 300 ? `${first.slice(0, 300)}…` : first;
}
