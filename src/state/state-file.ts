import { open, rename, stat, unlink } from "node:fs/promises";
import type { PrefixIndex } from "../index/prefix-index.js";
import type { Logger } from "../logger.js";
import type { WorkerRegistry } from "../workers/registry.js";
import { loadSnapshot, SnapshotRefused, writeSnapshot } from "./snapshot.js";
import { StateSecret } from "./state-secret.js";

/**
 * Without --state-secret the file is checked against this key: it tells a corrupt or truncated
 * file, or one that is not a snapshot, from a good one; it does not tell who wrote it (the file
 * is the router's own, written with mode 0600).
 */
const UNSIGNED_FILE_KEY = "radixgate state file (integrity only, no secret given)";

export interface StateFileOptions {
  readonly path: string;
  /** --state-secret, when given: the file is signed with it, as the ops are. */
  readonly secret: string | undefined;
  /** --state-key-prefix: the signature's scope, so that another fleet's file is refused. */
  readonly keyPrefix: string;
  readonly maxBytes: number;
  /** --state-max-op-age-ms: an older file is refused (the engines have moved on since). */
  readonly maxAgeMs: number;
  /** Longest a save on shutdown may take; past it the stop goes on without the file. */
  readonly saveTimeoutMs: number;
}

/**
 * --state-file: the prefix index saved when the router stops and loaded when it starts (one
 * service of assembly/lifecycle.ts). `index` is the one below any publishing layer: loaded texts
 * are what this router already knew, not decisions to share again.
 */
export class StateFile {
  private readonly secret: StateSecret;
  private readonly scope: string;

  constructor(
    private readonly options: StateFileOptions,
    private readonly index: PrefixIndex,
    private readonly registry: WorkerRegistry,
    private readonly logger: Logger,
  ) {
    this.secret = new StateSecret(options.secret ?? UNSIGNED_FILE_KEY);
    this.scope = `${options.keyPrefix}:state-file`;
  }

  /** Loads the file into the index for the workers registered now; never throws (logs why not). */
  async load(): Promise<void> {
    const { path, maxBytes, maxAgeMs } = this.options;
    const started = performance.now();
    let data: Buffer;
    try {
      const size = (await stat(path)).size;
      if (size > maxBytes + 8192)
        throw new SnapshotRefused(`it is larger than --state-snapshot-max-bytes (${size} bytes)`);
      data = await readBounded(path, size, maxBytes + 8192);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") {
        this.logger.info({ path }, "state file: none yet; starting cold");
        return;
      }
      this.refused(err);
      return;
    }
    try {
      const { header, applied } = await loadSnapshot(
        data,
        { secret: this.secret, scope: this.scope, maxAgeMs, maxBytes },
        this.index,
        this.registry,
        this.logger,
      );
      this.logger.info(
        {
          path,
          age_ms: Date.now() - header.at,
          bytes: data.length,
          workers: applied.workers,
          paths: applied.paths,
          unknown_workers: applied.skipped,
          held_for_later: applied.held,
          load_ms: Math.round(performance.now() - started),
          longest_slice_ms: applied.longestSliceMs,
        },
        "state file: prefix index loaded",
      );
    } catch (err) {
      this.refused(err);
    }
  }

  private refused(err: unknown): void {
    const reason = err instanceof SnapshotRefused ? err.message : String(err);
    this.logger.warn(
      { path: this.options.path, reason },
      `state file refused: ${reason}; starting cold`,
    );
  }

  /** Writes the snapshot (to a temporary file renamed over the old one); bounded; never throws. */
  async save(): Promise<void> {
    const { path, saveTimeoutMs } = this.options;
    const started = performance.now();
    const temporary = `${path}.${process.pid}.tmp`;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<"timeout">((resolve) => {
      timer = setTimeout(() => resolve("timeout"), saveTimeoutMs);
      timer.unref();
    });
    const work = (async () => {
      const data = await writeSnapshot(
        this.index,
        this.registry.list().map((w) => w.id),
        {
          secret: this.secret,
          scope: this.scope,
          writer: `pid-${process.pid}`,
          stream: "",
          maxBytes: this.options.maxBytes,
        },
      );
      const file = await open(temporary, "w", 0o600);
      try {
        await file.writeFile(data);
        await file.sync();
      } finally {
        await file.close();
      }
      await rename(temporary, path);
      return data.length;
    })();
    try {
      const outcome = await Promise.race([work, timeout]);
      if (outcome === "timeout") {
        this.logger.warn(
          { path, timeout_ms: saveTimeoutMs },
          "state file: save timed out; not saved",
        );
        work.catch(() => unlink(temporary).catch(() => {}));
        return;
      }
      this.logger.info(
        { path, bytes: outcome, save_ms: Math.round(performance.now() - started) },
        "state file: prefix index saved",
      );
    } catch (err) {
      await unlink(temporary).catch(() => {});
      this.logger.warn({ path, err }, "state file: could not save the prefix index");
    } finally {
      clearTimeout(timer);
    }
  }
}

/** At most `limit` bytes of the file (it may grow while read). */
async function readBounded(path: string, size: number, limit: number): Promise<Buffer> {
  const file = await open(path, "r");
  try {
    const buffer = Buffer.alloc(Math.min(size, limit) + 1);
    let filled = 0;
    for (;;) {
      const { bytesRead } = await file.read(buffer, filled, buffer.length - filled, filled);
      if (bytesRead === 0) break;
      filled += bytesRead;
      if (filled === buffer.length)
        throw new SnapshotRefused("it is larger than --state-snapshot-max-bytes");
    }
    return buffer.subarray(0, filled);
  } finally {
    await file.close();
  }
}
