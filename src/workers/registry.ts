import { RouterError } from "../errors.js";
import { type HostResolver, systemResolver } from "./host-lookup.js";
import { isSelfAddress, type ListenAddress } from "./self-address.js";
import { admitted, type ModelPlan } from "./served-models.js";
import { Worker, type WorkerOptions } from "./worker.js";
import type { WorkerRole, WorkerType } from "./worker-role.js";
import {
  hostNeedsLookup,
  linkLocalHostReason,
  linkLocalReason,
  normalizeWorkerUrl,
  workerIdentity,
  workerIdFor,
} from "./worker-url.js";

/** How the registry vets new workers (besides what every worker gets, WorkerOptions). */
export interface AdmissionRules {
  /** --allow-link-local-workers: accept 169.254.0.0/16, fe80::/10 and cloud metadata hosts. */
  allowLinkLocal?: boolean;
  /** --worker-api-key: the key for workers added without one of their own. */
  defaultApiKey?: string;
  /** How `addResolved` resolves host names (default: the system resolver, connect timeout). */
  resolveHost?: HostResolver;
}

export interface AddOptions {
  /** Bearer key for this worker; overrides --worker-api-key. */
  apiKey?: string;
  /** What the URL's host name resolved to (addResolved fills it in): compared and checked too. */
  addresses?: readonly string[];
  /** Prefill or decode (disaggregation); regular when absent. */
  role?: WorkerRole;
}

export type RegistryListener = (event: "added" | "removed", worker: Worker) => void;

/** The set of workers behind the router. Adding and removing is safe while requests are in flight. */
export class WorkerRegistry {
  private readonly byId = new Map<string, Worker>();
  /** Every identity key (workerIdentity) of every worker: its URL's, and its resolved addresses'. */
  private readonly byIdentity = new Map<string, Worker>();
  private readonly identitiesOf = new Map<Worker, string[]>();
  private readonly listeners: RegistryListener[] = [];
  /**
   * The workers as a list, made on the first read after a change: a 10,000-entry worker file
   * joining in slices copied the whole list at each of its adds (O(n²)), where requests between
   * two slices need it once.
   */
  private listed: readonly Worker[] | undefined = [];
  /** Workers added with an API key of their own (not --worker-api-key). */
  private readonly ownKeys = new WeakSet<Worker>();

  /** Where the router listens once known; a worker at that address would be a request loop. */
  private listen: ListenAddress | undefined;

  constructor(
    private readonly options: WorkerOptions,
    private readonly rules: AdmissionRules = {},
  ) {}

  /** Tells the registry the router's own address, so a worker pointing back at it is refused. */
  setListenAddress(listen: ListenAddress): void {
    this.listen = listen;
  }

  /**
   * Registers a worker under its canonical URL; throws invalid_worker_url (malformed, the
   * router's own address, link-local without --allow-link-local-workers) or worker_exists
   * (any spelling of a registered worker: loopback names, IPv4-mapped forms, a trailing /v1, or
   * with `addresses`, a name that resolves to a registered worker's address).
   */
  add(rawUrl: string, addOptions: AddOptions = {}): Worker {
    const url = canonical(rawUrl);
    const addresses = addOptions.addresses ?? [];
    this.refuseSelf(url, addresses);
    if (!this.rules.allowLinkLocal) {
      const reason = linkLocalReason(url) ?? resolvedLinkLocalReason(url, addresses);
      if (reason !== undefined) {
        throw new RouterError(
          "invalid_worker_url",
          `Worker URL ${url} refused: ${reason}. Start the router with --allow-link-local-workers if this really is a worker.`,
        );
      }
    }
    const identities = [
      ...new Set([workerIdentity(url), ...addresses.map((a) => workerIdentity(url, a))]),
    ];
    for (const identity of identities) {
      const existing = this.byIdentity.get(identity);
      if (existing === undefined) continue;
      const same = existing.url === url ? "" : ` as ${existing.url} (the same server)`;
      throw new RouterError("worker_exists", `Worker ${url} is already registered${same}.`);
    }
    const id = workerIdFor(url);
    if (this.byId.has(id))
      throw new RouterError("worker_exists", `Worker ${url} is already registered.`);
    const apiKey = addOptions.apiKey ?? this.rules.defaultApiKey;
    const worker = new Worker(id, url, this.options, apiKey, addOptions.role);
    if (addOptions.apiKey !== undefined) this.ownKeys.add(worker);
    this.byId.set(id, worker);
    for (const identity of identities) this.byIdentity.set(identity, worker);
    this.identitiesOf.set(worker, identities);
    this.listed = undefined;
    for (const listener of this.listeners) listener("added", worker);
    return worker;
  }

  /**
   * `add`, after resolving the URL's host name (bounded by the connect timeout): the addresses
   * are checked for link-local and compared with the registered workers'. For the admin API,
   * --worker-urls and every other path where a wait is fine.
   */
  async addResolved(rawUrl: string, addOptions: AddOptions = {}): Promise<Worker> {
    const addresses = await this.resolveAddresses(rawUrl);
    return this.add(rawUrl, addresses.length > 0 ? { ...addOptions, addresses } : addOptions);
  }

  /** The addresses `addResolved` checks a URL's host name by (none for an IP literal). */
  async resolveAddresses(rawUrl: string): Promise<string[]> {
    const url = canonical(rawUrl);
    if (!hostNeedsLookup(url)) return [];
    const resolve = this.rules.resolveHost ?? systemResolver(this.options.connectTimeoutMs);
    return [...(await resolve(new URL(url).hostname))];
  }

  private refuseSelf(url: string, addresses: readonly string[]): void {
    const listen = this.listen;
    if (listen === undefined) return;
    const viaAddress = addresses.some((a) => isSelfAddress(withHost(url, a), listen));
    if (isSelfAddress(url, listen) || viaAddress) {
      throw new RouterError(
        "invalid_worker_url",
        `Worker URL ${url} is this router's own address (${listen.host}:${listen.port}); requests sent there would loop.`,
      );
    }
  }

  /**
   * Unregisters a worker: it gets no new requests, requests in flight complete, its prefix index
   * entries are dropped (by the index's listener, index/follow-workers.ts) and its connection pool
   * closes once they have.
   */
  remove(idOrUrl: string): Worker | undefined {
    const worker = this.get(idOrUrl);
    if (!worker) return undefined;
    this.byId.delete(worker.id);
    for (const identity of this.identitiesOf.get(worker) ?? []) this.byIdentity.delete(identity);
    this.identitiesOf.delete(worker);
    this.listed = undefined;
    worker.removed = true;
    // Pool.close() waits for in-flight requests before closing sockets.
    worker.closePool().catch(() => {});
    for (const listener of this.listeners) listener("removed", worker);
    return worker;
  }

  /** By id, or by worker URL (raw or URL-encoded). */
  get(idOrUrl: string): Worker | undefined {
    const direct = this.byId.get(idOrUrl);
    if (direct) return direct;
    let candidate = idOrUrl;
    try {
      candidate = decodeURIComponent(idOrUrl);
    } catch {
      return undefined;
    }
    try {
      return this.byIdentity.get(workerIdentity(normalizeWorkerUrl(candidate)));
    } catch {
      return undefined;
    }
  }

  /** The worker's own API key, if it was added with one (a default --worker-api-key is not). */
  ownApiKey(worker: Worker): string | undefined {
    return this.ownKeys.has(worker) ? worker.apiKey : undefined;
  }

  list(): readonly Worker[] {
    this.listed ??= [...this.byId.values()];
    return this.listed;
  }

  get size(): number {
    return this.byId.size;
  }

  /**
   * Workers that may take a new request now, minus those already tried for this request; with
   * `type`, only those of that type (one side of a prefill/decode pair); with `plan`, only those
   * the request's model plan admits (served-models.ts).
   */
  candidates(exclude?: ReadonlySet<Worker>, type?: WorkerType, plan?: ModelPlan): Worker[] {
    const out: Worker[] = [];
    for (const worker of this.list()) {
      if (type !== undefined && worker.role.type !== type) continue;
      if (worker.available && !exclude?.has(worker)) out.push(worker);
    }
    return plan === undefined ? out : (admitted(out, plan) as Worker[]);
  }

  onChange(listener: RegistryListener): void {
    this.listeners.push(listener);
  }

  /** Closes every pool (shutdown). */
  async close(): Promise<void> {
    await Promise.allSettled(this.list().map((w) => w.closePool()));
  }
}

function canonical(rawUrl: string): string {
  try {
    return normalizeWorkerUrl(rawUrl);
  } catch (err) {
    throw new RouterError("invalid_worker_url", `Worker URL ${(err as Error).message}`);
  }
}

/** The URL with its host replaced by an address (brackets for IPv6), for the self check. */
function withHost(url: string, address: string): string {
  const parsed = new URL(url);
  parsed.hostname = address.includes(":") ? `[${address}]` : address;
  return parsed.toString();
}

/** Why one of the addresses a worker's name resolved to is link-local, or undefined. */
function resolvedLinkLocalReason(url: string, addresses: readonly string[]): string | undefined {
  for (const address of addresses) {
    const reason = linkLocalHostReason(address);
    if (reason !== undefined) return `${new URL(url).hostname} resolves to ${reason}`;
  }
  return undefined;
}
