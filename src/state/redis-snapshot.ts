import type { PrefixIndex } from "../index/prefix-index.js";
import type { Logger } from "../logger.js";
import type { WorkerRegistry } from "../workers/registry.js";
import type { RedisLink } from "./redis-link.js";
import { loadSnapshot, SnapshotRefused, writeSnapshot } from "./snapshot.js";
import type { StateKeys } from "./state-keys.js";
import type { StateSecret } from "./state-secret.js";

export interface RedisSnapshotOptions {
  readonly keys: StateKeys;
  readonly secret: StateSecret;
  readonly replicaId: string;
  /** --state-snapshot-interval-ms (0 = never written). */
  readonly intervalMs: number;
  readonly maxBytes: number;
  /** --state-max-op-age-ms: an older snapshot is refused, and the key expires after it. */
  readonly maxAgeMs: number;
  /** The ops stream position the index holds everything up to (the reader's). */
  readonly position: () => string;
}

/** Longest one snapshot GET or SET may take (it moves up to --state-snapshot-max-bytes). */
const TRANSFER_TIMEOUT_MS = 10_000;

/**
 * The fleet's index snapshot in Redis (state/snapshot.ts), so that a replica that starts after a
 * long run knows what the engines hold beyond the ops stream's trimmed length: it loads the
 * snapshot, then reads the ops stream only after the position the snapshot covers.
 *
 * Every interval one replica writes it (whoever takes the lock key first, SET NX with a TTL a
 * little under the interval), so the fleet writes one snapshot per interval whatever its size.
 * The value expires after --state-max-op-age-ms, past which a reader would refuse it anyway.
 */
export class RedisSnapshot {
  private timer: NodeJS.Timeout | undefined;
  private writing: Promise<void> | undefined;
  private stopped = false;

  constructor(
    private readonly link: RedisLink,
    private readonly options: RedisSnapshotOptions,
    private readonly logger: Logger,
  ) {}

  /**
   * Loads the snapshot into `index` for the workers in `registry`; returns the stream position to
   * read on from, or undefined (none, refused, Redis away: read the stream from its start).
   */
  async load(index: PrefixIndex, registry: WorkerRegistry): Promise<string | undefined> {
    const { keys, secret, maxBytes, maxAgeMs } = this.options;
    const started = performance.now();
    try {
      const length = await this.link.commands.strlen(keys.snapshot);
      if (length === 0) return undefined;
      if (length > maxBytes + 16_384)
        throw new SnapshotRefused(`it is larger than --state-snapshot-max-bytes (${length} bytes)`);
      const data = await withTimeout(this.link.commands.getBuffer(keys.snapshot));
      if (data === null) return undefined;
      const { header, applied } = await loadSnapshot(
        data,
        { secret, scope: keys.snapshot, maxAgeMs, maxBytes },
        index,
        registry,
        this.logger,
      );
      this.logger.info(
        {
          age_ms: Date.now() - header.at,
          bytes: data.length,
          stream: header.stream,
          workers: applied.workers,
          paths: applied.paths,
          unknown_workers: applied.skipped,
          held_for_later: applied.held,
          load_ms: Math.round(performance.now() - started),
          longest_slice_ms: applied.longestSliceMs,
        },
        "shared state: index snapshot loaded; replaying the ops after it",
      );
      return header.stream === "" ? undefined : header.stream;
    } catch (err) {
      const reason = err instanceof SnapshotRefused ? err.message : String(err);
      this.logger.warn(
        { reason },
        `shared state: index snapshot refused: ${reason}; replaying the ops stream only`,
      );
      return undefined;
    }
  }

  /** Writes the snapshot every interval when this replica takes the lock. */
  startRefresh(index: PrefixIndex, registry: WorkerRegistry): void {
    const { intervalMs } = this.options;
    if (intervalMs === 0 || this.stopped) return;
    const next = () => {
      // Jitter so that the replicas do not all race for the lock at the same instant.
      this.timer = setTimeout(
        () => {
          this.writing = this.refresh(index, registry).then(() => {
            this.writing = undefined;
            if (!this.stopped) next();
          });
        },
        Math.round(intervalMs * (0.8 + Math.random() * 0.4)),
      );
      this.timer.unref();
    };
    next();
  }

  /** One refresh: the lock, then the snapshot; false when another replica had the lock. */
  async refresh(index: PrefixIndex, registry: WorkerRegistry): Promise<boolean> {
    const { keys, replicaId, intervalMs, maxAgeMs } = this.options;
    if (!this.link.up) return false;
    try {
      const lockMs = Math.max(1, Math.floor(intervalMs * 0.9));
      const taken = await this.link.commands.set(keys.snapshotLock, replicaId, "PX", lockMs, "NX");
      if (taken !== "OK") return false;
      const started = performance.now();
      const data = await writeSnapshot(
        index,
        registry.list().map((w) => w.id),
        {
          secret: this.options.secret,
          scope: keys.snapshot,
          writer: replicaId,
          stream: this.options.position(),
          maxBytes: this.options.maxBytes,
        },
      );
      await withTimeout(this.link.commands.set(keys.snapshot, data, "PX", maxAgeMs));
      this.logger.debug(
        { bytes: data.length, write_ms: Math.round(performance.now() - started) },
        "shared state: index snapshot written",
      );
      return true;
    } catch (err) {
      this.logger.warn({ err }, "shared state: index snapshot not written");
      return false;
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.writing;
  }
}

async function withTimeout<T>(work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      work,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error("timed out")), TRANSFER_TIMEOUT_MS);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
