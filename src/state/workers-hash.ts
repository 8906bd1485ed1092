import type { Logger } from "../logger.js";
import type { WorkerRegistry } from "../workers/registry.js";
import type { WorkerRole } from "../workers/worker-role.js";
import type { OpOrder } from "./op-order.js";
import type { OpsPublisher } from "./ops-publisher.js";
import type { RedisLink } from "./redis-link.js";
import type { ReplicatedMembership } from "./replicated-membership.js";
import type { StateKeys } from "./state-keys.js";
import type { RejectReason } from "./state-op.js";
import type { StateSecret } from "./state-secret.js";
import { decodeWorkerEntry, encodeWorkerEntry } from "./worker-entry.js";

/** Entries of the workers hash read at most (a fleet has far fewer workers). */
const MAX_SHARED_WORKERS = 4096;
/** HSCAN page size. */
const SCAN_PAGE = 256;

export interface WorkersHashOptions {
  keys: StateKeys;
  registry: WorkerRegistry;
  /** Applies the hash's workers (one path with the peers' ops). */
  membership: ReplicatedMembership;
  publisher: OpsPublisher;
  /** Checks the signatures of the workers hash's values and opens their sealed API keys. */
  secret: StateSecret;
  /** A workers-hash value was refused (unsigned, badly signed...). */
  onRejected?: (reason: RejectReason) => void;
  /** Judges the age of the workers hash's values (the ops reader's, --state-max-op-age-ms). */
  order: OpOrder;
  /** How often this replica signs its workers' values again (a third of the age limit). */
  refreshMs: number;
}

/**
 * The Redis transport's copy of the worker set: a hash (canonical URL → signed value) written by
 * the publisher with each add and remove op, which a replica loads whenever its link comes up (at
 * start, after an outage): it first sends what it queued meanwhile, then adds the hash's workers
 * it lacks, through the replicated membership. An empty hash means Redis lost its data: the
 * replica then publishes its own set.
 *
 * Removals travel only as ops on the stream, which a replica back from an outage reads on from
 * where it stopped: the hash is never a reason to remove a worker, because another replica may
 * be writing it back (after Redis lost its data) while this one reads it, and a partial view would
 * drop live workers.
 *
 * A worker's own API key travels with it, sealed with the state secret (AES-256-GCM), so that every
 * replica can call it; it is never in Redis in clear. A worker without one is added by each
 * replica with its own --worker-api-key.
 */
export class WorkersHash {
  private refreshTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly link: RedisLink,
    private readonly options: WorkersHashOptions,
    private readonly logger: Logger,
  ) {}

  /**
   * Signs this replica's workers' values in the hash again, every `refreshMs`: a value is refused
   * once older than the age limit, so only workers some replica still has stay in the set a
   * starting replica loads.
   */
  startRefresh(): void {
    if (this.refreshTimer !== undefined) return;
    this.refreshTimer = setInterval(() => void this.refresh(), this.options.refreshMs);
    this.refreshTimer.unref();
  }

  stopRefresh(): void {
    clearInterval(this.refreshTimer);
    this.refreshTimer = undefined;
  }

  /** One round of signing again (the timer's work; tests call it). */
  async refresh(): Promise<void> {
    const { registry, keys, secret } = this.options;
    const workers = registry.list();
    if (!this.link.up || workers.length === 0) return;
    const pipeline = this.link.commands.pipeline();
    const now = Date.now();
    for (const worker of workers) {
      const role = worker.role.type === "regular" ? undefined : worker.role;
      const apiKey = registry.ownApiKey(worker);
      pipeline.hset(
        keys.workers,
        worker.url,
        encodeWorkerEntry(worker.url, apiKey, secret, keys.workers, now, role),
      );
    }
    await pipeline.exec().catch(() => {});
  }

  /** A worker removed by a peer: its value goes too, should a refresh have written it back. */
  forget(url: string): void {
    if (this.link.up) void this.link.commands.hdel(this.options.keys.workers, url).catch(() => {});
  }

  /**
   * The workers hash, read in HSCAN pages up to MAX_SHARED_WORKERS entries: a hash someone filled
   * with junk costs a bounded read, the rest is ignored (and counted as oversize).
   */
  private async readShared(): Promise<[url: string, raw: string][]> {
    const out: [string, string][] = [];
    let cursor = "0";
    do {
      const [next, flat] = await this.link.commands.hscan(
        this.options.keys.workers,
        cursor,
        "COUNT",
        SCAN_PAGE,
      );
      for (let i = 0; i + 1 < flat.length; i += 2)
        out.push([flat[i] as string, flat[i + 1] as string]);
      cursor = next;
      if (out.length > MAX_SHARED_WORKERS) {
        this.options.onRejected?.("oversize");
        this.logger.warn(
          { read: out.length },
          "shared state: the workers hash holds more entries than a fleet has; the rest is ignored",
        );
        break;
      }
    } while (cursor !== "0");
    return out;
  }

  /** Sends what is queued, then adds the shared set's workers (see the class comment). */
  async reconcile(): Promise<void> {
    const { keys, registry, publisher, secret } = this.options;
    await publisher.flush();
    let shared: [url: string, raw: string][];
    try {
      shared = await this.readShared();
    } catch {
      return; // Redis went away again: the next time it comes up does this again
    }
    const valid: [url: string, apiKey: string | undefined, role: WorkerRole | undefined][] = [];
    for (const [url, raw] of shared) {
      const entry = decodeWorkerEntry(url, raw, secret, keys.workers);
      if ("rejected" in entry) this.options.onRejected?.(entry.rejected);
      // Not signed again for longer than the age limit: no replica keeps it (or it was put back).
      else if (!this.options.order.fresh(entry.at)) this.options.onRejected?.("stale");
      else valid.push([url, entry.apiKey, entry.role]);
    }
    // No signed entry (Redis lost its data, or holds only what someone else wrote): publish ours.
    if (valid.length === 0) {
      for (const worker of registry.list())
        publisher.publish(this.options.membership.addChange(worker));
      return;
    }
    const { membership } = this.options;
    await Promise.all(valid.map(([url, apiKey, role]) => membership.applyAdd(url, apiKey, role)));
  }
}
