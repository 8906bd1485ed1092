import type { Logger } from "../logger.js";
import type { WorkerRegistry } from "../workers/registry.js";
import type { Worker } from "../workers/worker.js";
import type { WorkerRole } from "../workers/worker-role.js";
import { hostNeedsLookup, normalizeWorkerUrl } from "../workers/worker-url.js";

/** A membership change as it travels between replicas: an add or a remove of one worker. */
export type MemberChange =
  | {
      readonly kind: "add";
      readonly url: string;
      /** The worker's own API key; absent = none of its own (each replica uses its default). */
      readonly apiKey?: string;
      /** Prefill or decode (disaggregation), with its bootstrap port; absent = a regular worker. */
      readonly role?: WorkerRole;
    }
  | { readonly kind: "remove"; readonly url: string };

/** Whether a URL's host is a name to resolve (false for an IP literal, or a URL it cannot parse). */
function needsLookup(url: string): boolean {
  try {
    return hostNeedsLookup(normalizeWorkerUrl(url));
  } catch {
    return false; // registry.add refuses it with the reason
  }
}

export interface ReplicatedMembershipHooks {
  /** A worker arrived from a peer (e.g. check its health before it takes traffic). */
  onRemoteAdd?: (worker: Worker) => void;
}

/**
 * The fleet's worker set kept the same on every replica, whichever transport carries it (Redis
 * between hosts, radixgate-cluster's local channel on one host): one path for every change.
 *
 * Out: every add and remove of the registry, whatever made it (the admin API, --worker-urls,
 * a discovery source), is handed to the transport as a MemberChange. In: a peer's change is
 * applied here, with the checks of an admin-API add (canonical URL, not this router, not
 * link-local, not another spelling of a registered worker, its host name resolved and checked),
 * and a peer's worker takes traffic only once this replica's own probe passes (onRemoteAdd). A
 * change applied here is not handed out again.
 */
export class ReplicatedMembership {
  /** True while applying a peer's change, so the registry listener does not send it back. */
  private applying = false;
  /** Peers' adds whose host name is being resolved, by URL (a remove meanwhile cancels one). */
  private readonly pendingAdds = new Map<string, symbol>();
  private carrier: ((change: MemberChange) => void) | undefined;

  constructor(
    private readonly registry: WorkerRegistry,
    private readonly logger: Logger,
    private readonly hooks: ReplicatedMembershipHooks = {},
  ) {
    registry.onChange((event, worker) => {
      if (this.applying || this.carrier === undefined) return;
      this.carrier(
        event === "added" ? this.addChange(worker) : { kind: "remove", url: worker.url },
      );
    });
  }

  /** The transport that carries this replica's changes to its peers (one). */
  carryWith(send: (change: MemberChange) => void): void {
    this.carrier = send;
  }

  /** A worker of the registry as an add (with its own API key and role). */
  addChange(worker: Worker): MemberChange {
    const apiKey = this.registry.ownApiKey(worker);
    // A prefill or decode worker keeps its role on the peers (disaggregation).
    const role = worker.role.type === "regular" ? {} : { role: worker.role };
    return apiKey === undefined
      ? { kind: "add", url: worker.url, ...role }
      : { kind: "add", url: worker.url, apiKey, ...role };
  }

  /** A peer's change, applied (an add resolves once the worker is in the registry, or refused). */
  apply(change: MemberChange): Promise<void> {
    if (change.kind === "remove") {
      this.applyRemove(change.url);
      return Promise.resolve();
    }
    return this.applyAdd(change.url, change.apiKey, change.role);
  }

  /**
   * A peer added a worker. A URL with an IP address is added at once, so that the decisions that
   * follow it find it; a host name waits for its resolution.
   */
  applyAdd(url: string, apiKey?: string, role?: WorkerRole): Promise<void> {
    const { registry } = this;
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
      worker = this.registry.add(url, {
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
    this.hooks.onRemoteAdd?.(worker);
  }

  private refused(url: string, err: unknown): void {
    this.logger.warn({ url, err: (err as Error).message }, "a peer's worker was refused here");
  }

  /** A peer removed a worker (or one whose add is still resolving). */
  applyRemove(url: string): void {
    this.pendingAdds.delete(url);
    this.applying = true;
    let worker: Worker | undefined;
    try {
      worker = this.registry.remove(url);
    } finally {
      this.applying = false;
    }
    if (worker !== undefined)
      this.logger.info({ worker: worker.id, url: worker.url }, "worker removed by a peer replica");
  }
}
