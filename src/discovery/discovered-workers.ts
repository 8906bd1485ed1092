import { RouterError } from "../errors.js";
import type { Logger } from "../logger.js";
import type { Worker } from "../workers/worker.js";
import { normalizeWorkerUrl } from "../workers/worker-url.js";
import type { WorkerMembership } from "./membership.js";
import type { WorkerSpec } from "./worker-spec.js";

/**
 * A large change joins at most APPLY_SLICE workers every APPLY_PAUSE_MS (500 a second, the pace
 * of first health checks, workers/probe-slots.ts): 9,999 entries joined in back-to-back slices
 * kept the event loop busy for seconds with their registrations and first health checks, and
 * legitimate requests waited behind them; slices of 100 still held it some 50 ms each. A change
 * of up to one slice applies at once.
 */
const APPLY_SLICE = 25;
/** URLs normalized between two turns of the event loop (a few ms of work). */
const NORMALIZE_SLICE = 250;
const APPLY_PAUSE_MS = 50;

interface Owned {
  worker: Worker;
  /** Set while the worker drains after leaving the source; removal when it fires. */
  drainTimer?: NodeJS.Timeout;
}

/**
 * The workers one discovery source (a file, a DNS name) has put in the registry, kept equal to
 * the source's latest answer: new entries join through the membership path (checks, then a health
 * check before traffic), dropped ones drain — no new requests, in-flight ones complete — and are
 * removed after `graceMs`; one that comes back within it keeps its tree. Workers registered by
 * another path (--worker-urls, the admin API, another source) are left to it.
 */
export class DiscoveredWorkers {
  private readonly owned = new Map<string, Owned>();
  /** Applies run one after another, each on the source's whole answer. */
  private queue: Promise<void> = Promise.resolve();
  private closed = false;

  constructor(
    private readonly membership: WorkerMembership,
    private readonly source: string,
    private readonly graceMs: number,
    private readonly logger: Logger,
  ) {}

  /** Makes the source's workers `specs`; resolves once new workers have had their health check. */
  apply(specs: readonly WorkerSpec[]): Promise<void> {
    const run = this.queue.then(() => this.reconcile(specs));
    this.queue = run.catch(() => {});
    return run;
  }

  /** Stops pending removals (shutdown: the registry closes every worker itself). */
  close(): void {
    this.closed = true;
    for (const entry of this.owned.values()) clearTimeout(entry.drainTimer);
  }

  /** The URLs this source has registered now (draining ones included). */
  urls(): string[] {
    return [...this.owned.keys()];
  }

  private async reconcile(specs: readonly WorkerSpec[]): Promise<void> {
    if (this.closed) return;
    const wanted = new Map<string, WorkerSpec>();
    let normalized = 0;
    for (const spec of specs) {
      // In slices too: 10,000 URLs normalized back to back held the event loop 90-290 ms.
      if (++normalized % NORMALIZE_SLICE === 0) {
        await new Promise((resolve) => setImmediate(resolve));
        if (this.closed) return;
      }
      try {
        wanted.set(normalizeWorkerUrl(spec.url), spec);
      } catch (err) {
        this.logger.warn(
          { source: this.source, url: spec.url, reason: (err as Error).message },
          "discovered worker URL refused",
        );
      }
    }
    for (const [url, entry] of this.owned) {
      // Removed by another path (the admin API): forget it; if still listed, it is added again.
      if (entry.worker.removed) {
        clearTimeout(entry.drainTimer);
        this.owned.delete(url);
      } else if (!wanted.has(url) && entry.drainTimer === undefined) {
        this.drain(url, entry);
      }
    }
    const joining: Promise<void>[] = [];
    let seen = 0;
    for (const [url, spec] of wanted) {
      const entry = this.owned.get(url);
      if (entry === undefined) joining.push(this.join(url, spec));
      else if (entry.drainTimer !== undefined) this.keep(url, entry);
      // A large change in slices, paced: requests are served between them. The joins' health
      // checks and engine reads wait for their slots (workers/probe-slots.ts).
      if (++seen % APPLY_SLICE === 0 && seen < wanted.size) {
        await new Promise((resolve) => setTimeout(resolve, APPLY_PAUSE_MS));
        if (this.closed) break;
      }
    }
    await Promise.all(joining);
  }

  private async join(url: string, spec: WorkerSpec): Promise<void> {
    try {
      const worker = await this.membership.add(spec, this.source);
      if (this.closed || worker.removed) return;
      this.owned.set(url, { worker });
    } catch (err) {
      const known = err instanceof RouterError;
      const log = { source: this.source, url, reason: (err as Error).message };
      if (known && err.code === "worker_exists") {
        this.logger.info(log, "discovered worker already registered by another path; left to it");
      } else {
        this.logger.warn(log, "discovered worker refused");
      }
    }
  }

  private drain(url: string, entry: Owned): void {
    const { worker } = entry;
    worker.setDraining(true);
    this.logger.info(
      {
        source: this.source,
        worker: worker.id,
        url,
        in_flight: worker.inFlight,
        grace_ms: this.graceMs,
      },
      "worker left its discovery source: draining (no new requests)",
    );
    const remove = () => {
      this.owned.delete(url);
      this.membership.remove(worker.id, this.source);
    };
    if (this.graceMs <= 0) {
      remove();
      return;
    }
    entry.drainTimer = setTimeout(remove, this.graceMs);
    entry.drainTimer.unref();
  }

  /** Back within the grace period: takes traffic again with its tree intact. */
  private keep(url: string, entry: Owned): void {
    clearTimeout(entry.drainTimer);
    entry.drainTimer = undefined;
    entry.worker.setDraining(false);
    this.logger.info(
      { source: this.source, worker: entry.worker.id, url },
      "worker back in its discovery source within the grace period: taking traffic, tree kept",
    );
  }
}
