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
 * first sends what it queued meanwhile, then adds the workers of the hash it lacks. An empty hash
 * means Redis lost its data: the replica then publishes its own set.
 *
 * Removals travel only as ops on the stream, which a replica back from an outage reads on from
 * where it stopped: the hash is never a reason to remove a worker, because another replica may
 * be writing it back (after Redis lost its data) while this one reads it, and a partial view would
 * drop live workers.
 *
 * Worker API keys are secrets and never go to Redis: a replica adds a peer's worker with its own
 * --worker-api-key.
 */
export class MembershipSync {
  /** True while applying a peer's change, so the registry listener does not publish it back. */
  private applying = false;

  constructor(
    private readonly link: RedisLink,
    private readonly options: MembershipSyncOptions,
    private readonly logger: Logger,
  ) {
    options.registry.onChange((event, worker) => {
      if (this.applying) return;
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

  /** Sends what is queued, then adds the shared set's workers (see the class comment). */
  async reconcile(): Promise<void> {
    const { keys, registry, publisher } = this.options;
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
    for (const url of urls) this.applyAdd(url);
  }
}
