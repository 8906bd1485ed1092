import type { Logger } from "../logger.js";
import type { WorkerRegistry } from "../workers/registry.js";
import type { Worker } from "../workers/worker.js";
import type { WorkerRole } from "../workers/worker-role.js";
import { hostNeedsLookup, normalizeWorkerUrl } from "../workers/worker-url.js";
import type { OpOrder } from "./op-order.js";
import type { OpsPublisher } from "./ops-publisher.js";
import type { RedisLink } from "./redis-link.js";
import type { StateKeys } from "./state-keys.js";
import type { RejectReason, StateOp } from "./state-op.js";
import type { StateSecret } from "./state-secret.js";
import { decodeWorkerEntry, encodeWorkerEntry } from "./worker-entry.js";

/** Whether a URL's host is a name to resolve (false for an IP literal, or a URL it cannot parse). */
function needsLookup(url: string): boolean {
  try {
    return hostNeedsLookup(normalizeWorkerUrl(url));
  } catch {
    return false; // registry.add refuses it with the reason
  }
}

/** Entries of the workers hash read at most (a fleet has far fewer workers). */
const MAX_SHARED_WORKERS = 4096;
/** HSCAN page size. */
const SCAN_PAGE = 256;

export interface MembershipSyncOptions {
  keys: StateKeys;
  registry: WorkerRegistry;
  publisher: OpsPublisher;
  /** Checks the signatures of the workers hash's values and opens their sealed API keys. */
  secret: StateSecret;
  /** A workers-hash value was refused (unsigned, badly signed...). */
  onRejected?: (reason: RejectReason) => void;
  /** A worker arrived from a peer (e.g. check its health at once). */
  onRemoteAdd?: (worker: Worker) => void;
  /** Judges the age of the workers hash's values (the ops reader's, --state-max-op-age-ms). */
  order: OpOrder;
  /** How often this replica signs its workers' values again (a third of the age limit). */
  refreshMs: number;
}

/**
 * Keeps the worker set the same on every replica. A local add or remove (admin API,
 * --worker-urls) is published as an op on the ops stream and written to the workers hash; peers
 * apply the op as it arrives. Whenever the link comes up (at start, after an outage) the replica
 * first sends what it queued meanwhile, then adds the workers of the hash it lacks. An empty hash
 * means Redis lost its data: the replica then publishes its own set.
 *
 * Removals travel only as ops on the stream, which a replica back from an outage reads on from
 * where it stopped: the hash is never a reason to remove a worker, because another replica may
 * be writing it back (after Redis lost its data) while this one reads it, and a partial view would
 * drop live workers.
 *
 * A worker's own API key (given with it to the admin API) travels with it, sealed with the state
 * secret (AES-256-GCM), so that every replica can call it; it is never in Redis in clear. A worker
 * without one is added by each replica with its own --worker-api-key.
 */
export class MembershipSync {
  /** True while applying a peer's change, so the registry listener does not publish it back. */
  private applying = false;
  /** Peers' adds whose host name is being resolved, by URL (a remove meanwhile cancels one). */
  private readonly pendingAdds = new Map<string, symbol>();
  private refreshTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly link: RedisLink,
    private readonly options: MembershipSyncOptions,
    private readonly logger: Logger,
  ) {
    options.registry.onChange((event, worker) => {
      if (this.applying) return;
      options.publisher.publish(
        event === "added" ? this.addOp(worker) : { kind: "remove", url: worker.url },
      );
    });
  }

  private addOp(worker: Worker): StateOp {
    const apiKey = this.options.registry.ownApiKey(worker);
    // A prefill or decode worker keeps its role on the peers (disaggregation).
    const role = worker.role.type === "regular" ? {} : { role: worker.role };
    return apiKey === undefined
      ? { kind: "add", url: worker.url, ...role }
      : { kind: "add", url: worker.url, apiKey, ...role };
  }

  /**
   * A peer added a worker. It gets the same checks as an admin-API add (canonical URL, not this
   * router, not link-local, not another spelling of a registered worker, its host name resolved
   * and checked too), then takes traffic only once this replica's own probe passes (onRemoteAdd).
   * A URL with an IP address is added at once, so that the decisions that follow it on the stream
   * find it; a host name waits for its resolution.
   */
  applyAdd(url: string, apiKey?: string, role?: WorkerRole): Promise<void> {
    const { registry } = this.options;
    if (registry.get(url) !== undefined || this.pendingAdds.has(url)) return Promise.resolve();
    if (!needsLookup(url)) {
      this.addNow(url, apiKey, [], role);
      return Promise.resolve();
    }
    const token = Symbol(url);
    this.pendingAdds.set(url, token);
    return registry.resolveAddresses(url).then(
      (addresses) => {
        // A remove (or a newer add) arrived while the name resolved: this add is stale.
        if (this.pendingAdds.get(url) !== token) return;
        this.pendingAdds.delete(url);
        if (registry.get(url) === undefined) this.addNow(url, apiKey, addresses, role);
      },
      (err: unknown) => {
        if (this.pendingAdds.get(url) === token) this.pendingAdds.delete(url);
        this.refused(url, err);
      },
    );
  }

  private addNow(
    url: string,
    apiKey: string | undefined,
    addresses: readonly string[],
    role: WorkerRole | undefined,
  ): void {
    let worker: Worker;
    this.applying = true;
    try {
      worker = this.options.registry.add(url, {
        ...(apiKey !== undefined ? { apiKey } : {}),
        ...(addresses.length > 0 ? { addresses: [...addresses] } : {}),
        ...(role !== undefined ? { role } : {}),
      });
    } catch (err) {
      this.refused(url, err);
      return;
    } finally {
      this.applying = false;
    }
    this.logger.info({ worker: worker.id, url: worker.url }, "worker added by a peer replica");
    this.options.onRemoteAdd?.(worker);
  }

  private refused(url: string, err: unknown): void {
    this.logger.warn(
      { url, err: (err as Error).message },
      "shared state: a peer's worker was refused here",
    );
  }

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

  /** A peer removed a worker (or one whose add is still resolving). */
  applyRemove(url: string): void {
    // Its value goes too, should this replica's last refresh have written it back meanwhile.
    if (this.link.up) void this.link.commands.hdel(this.options.keys.workers, url).catch(() => {});
    this.pendingAdds.delete(url);
    this.applying = true;
    let worker: Worker | undefined;
    try {
      worker = this.options.registry.remove(url);
    } finally {
      this.applying = false;
    }
    if (worker !== undefined)
      this.logger.info({ worker: worker.id, url: worker.url }, "worker removed by a peer replica");
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
      for (const worker of registry.list()) publisher.publish(this.addOp(worker));
      return;
    }
    await Promise.all(valid.map(([url, apiKey, role]) => this.applyAdd(url, apiKey, role)));
  }
}
