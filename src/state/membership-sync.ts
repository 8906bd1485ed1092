import type { Logger } from "../logger.js";
import type { WorkerRegistry } from "../workers/registry.js";
import type { Worker } from "../workers/worker.js";
import type { OpsPublisher } from "./ops-publisher.js";
import type { RedisLink } from "./redis-link.js";
import type { StateKeys } from "./state-keys.js";

export interface MembershipSyncOptions {
  keys: StateKeys;
  registry: WorkerRegistry;
  publisher: OpsPublisher;
  /** A worker arrived from a peer (e.g. check its health at once). */
  onRemoteAdd?: (worker: Worker) => void;
}

/**
 * Keeps the worker set the same on every replica. A local add or remove (admin API,
 * --worker-urls) is published as an op on the ops stream and written to the workers hash; peers
 * apply the op as it arrives. Whenever the link comes up (at start, after an outage) the replica
 * first sends what it queued meanwhile, then adopts the hash: it adds the workers it lacks and
 * drops those the others removed. An empty hash means Redis lost its data: the replica then
 * publishes its own set.
 *
 * Worker API keys are secrets and never go to Redis: a replica adds a peer's worker with its own
 * --worker-api-key.
 */
export class MembershipSync {
  /** True while applying a peer's change, so the registry listener does not publish it back. */
  private applying = false;
  /** Local adds since the current reconcile began: not yet in the hash, but not removed elsewhere. */
  private readonly addedLocally = new Set<string>();

  constructor(
    private readonly link: RedisLink,
    private readonly options: MembershipSyncOptions,
    private readonly logger: Logger,
  ) {
    options.registry.onChange((event, worker) => {
      if (this.applying) return;
      if (event === "added") this.addedLocally.add(worker.url);
      options.publisher.publish({ kind: event === "added" ? "add" : "remove", url: worker.url });
    });
  }

  /** A peer added a worker. */
  applyAdd(url: string): void {
    const { registry } = this.options;
    if (registry.get(url) !== undefined) return;
    let worker: Worker;
    this.applying = true;
    try {
      worker = registry.add(url);
    } catch (err) {
      this.logger.warn(
        { url, err: (err as Error).message },
        "shared state: a peer's worker was refused here",
      );
      return;
    } finally {
      this.applying = false;
    }
    this.logger.info({ worker: worker.id, url: worker.url }, "worker added by a peer replica");
    this.options.onRemoteAdd?.(worker);
  }

  /** A peer removed a worker. */
  applyRemove(url: string): void {
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

  /** Sends what is queued, then adopts the shared set (see the class comment). */
  async reconcile(): Promise<void> {
    const { keys, registry, publisher } = this.options;
    this.addedLocally.clear();
    await publisher.flush();
    let shared: Record<string, string>;
    try {
      shared = await this.link.commands.hgetall(keys.workers);
    } catch {
      return; // Redis went away again: the next time it comes up does this again
    }
    const urls = Object.keys(shared);
    if (urls.length === 0) {
      for (const worker of registry.list()) publisher.publish({ kind: "add", url: worker.url });
      return;
    }
    const wanted = new Set(urls);
    for (const url of urls) this.applyAdd(url);
    for (const worker of registry.list()) {
      if (!wanted.has(worker.url) && !this.addedLocally.has(worker.url))
        this.applyRemove(worker.url);
    }
  }
}
