import { RouterError } from "../errors.js";
import type { PrefixIndex } from "../index/prefix-index.js";
import { isSelfAddress, type ListenAddress } from "./self-address.js";
import { Worker, type WorkerOptions } from "./worker.js";
import { linkLocalReason, normalizeWorkerUrl, workerIdFor } from "./worker-url.js";

/** How the registry vets new workers (besides what every worker gets, WorkerOptions). */
export interface AdmissionRules {
  /** --allow-link-local-workers: accept 169.254.0.0/16, fe80::/10 and cloud metadata hosts. */
  allowLinkLocal?: boolean;
  /** --worker-api-key: the key for workers added without one of their own. */
  defaultApiKey?: string;
}

export interface AddOptions {
  /** Bearer key for this worker; overrides --worker-api-key. */
  apiKey?: string;
}

export type RegistryListener = (event: "added" | "removed", worker: Worker) => void;

/** The set of workers behind the router. Adding and removing is safe while requests are in flight. */
export class WorkerRegistry {
  private readonly byId = new Map<string, Worker>();
  private readonly listeners: RegistryListener[] = [];
  /** Cached array of workers; rebuilt only when the set changes, not per request. */
  private snapshot: readonly Worker[] = [];
  /** Workers added with an API key of their own (not --worker-api-key). */
  private readonly ownKeys = new WeakSet<Worker>();

  /** Where the router listens once known; a worker at that address would be a request loop. */
  private listen: ListenAddress | undefined;

  constructor(
    private readonly options: WorkerOptions,
    /** Told when workers come and go, so it tracks exactly the registered set. */
    private readonly index?: PrefixIndex,
    private readonly rules: AdmissionRules = {},
  ) {}

  /** Tells the registry the router's own address, so a worker pointing back at it is refused. */
  setListenAddress(listen: ListenAddress): void {
    this.listen = listen;
  }

  /**
   * Registers a worker under its canonical URL; throws invalid_worker_url (malformed, the
   * router's own address, link-local without --allow-link-local-workers) or worker_exists
   * (any spelling of a registered URL).
   */
  add(rawUrl: string, addOptions: AddOptions = {}): Worker {
    let url: string;
    try {
      url = normalizeWorkerUrl(rawUrl);
    } catch (err) {
      throw new RouterError("invalid_worker_url", `Worker URL ${(err as Error).message}`);
    }
    if (this.listen && isSelfAddress(url, this.listen)) {
      throw new RouterError(
        "invalid_worker_url",
        `Worker URL ${url} is this router's own address (${this.listen.host}:${this.listen.port}); requests sent there would loop.`,
      );
    }
    const linkLocal = this.rules.allowLinkLocal ? undefined : linkLocalReason(url);
    if (linkLocal !== undefined) {
      throw new RouterError(
        "invalid_worker_url",
        `Worker URL ${url} refused: ${linkLocal}. Start the router with --allow-link-local-workers if this really is a worker.`,
      );
    }
    const id = workerIdFor(url);
    if (this.byId.has(id))
      throw new RouterError("worker_exists", `Worker ${url} is already registered.`);
    const apiKey = addOptions.apiKey ?? this.rules.defaultApiKey;
    const worker = new Worker(id, url, this.options, apiKey);
    if (addOptions.apiKey !== undefined) this.ownKeys.add(worker);
    this.byId.set(id, worker);
    const index = this.index;
    if (index !== undefined) {
      index.addWorker(id);
      worker.indexedChars = () => index.size(id);
    }
    this.snapshot = [...this.byId.values()];
    for (const listener of this.listeners) listener("added", worker);
    return worker;
  }

  /**
   * Unregisters a worker: it gets no new requests, requests in flight complete, its prefix index
   * entries are dropped and its connection pool closes once they have.
   */
  remove(idOrUrl: string): Worker | undefined {
    const worker = this.get(idOrUrl);
    if (!worker) return undefined;
    this.byId.delete(worker.id);
    this.snapshot = [...this.byId.values()];
    worker.removed = true;
    this.index?.removeWorker(worker.id);
    // Pool.close() waits for in-flight requests before closing sockets.
    worker.pool.close().catch(() => {});
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
      return this.byId.get(workerIdFor(normalizeWorkerUrl(candidate)));
    } catch {
      return undefined;
    }
  }

  /** The worker's own API key, if it was added with one (a default --worker-api-key is not). */
  ownApiKey(worker: Worker): string | undefined {
    return this.ownKeys.has(worker) ? worker.apiKey : undefined;
  }

  list(): readonly Worker[] {
    return this.snapshot;
  }

  get size(): number {
    return this.snapshot.length;
  }

  /** Workers that may take a new request now, minus those already tried for this request. */
  candidates(exclude?: ReadonlySet<Worker>): Worker[] {
    const out: Worker[] = [];
    for (const worker of this.snapshot) {
      if (worker.available && !exclude?.has(worker)) out.push(worker);
    }
    return out;
  }

  onChange(listener: RegistryListener): void {
    this.listeners.push(listener);
  }

  /** Closes every pool (shutdown). */
  async close(): Promise<void> {
    await Promise.allSettled(this.snapshot.map((w) => w.pool.close()));
  }
}
