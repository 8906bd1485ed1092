import { LogDigest } from "../log-digest.js";
import type { Logger } from "../logger.js";
import { ProbeSlots, SPREAD_SHARE, spreadOver } from "./probe-slots.js";
import type { WorkerRegistry } from "./registry.js";
import type { Worker } from "./worker.js";
import { requestWorker } from "./worker-request.js";

export interface HealthOptions {
  intervalMs: number;
  timeoutMs: number;
  failureThreshold: number;
  successThreshold: number;
  /** Path checked after the worker's base URL (SGLang and vLLM both answer /health). */
  endpoint?: string;
  /**
   * How long a worker may stay unhealthy before it counts as dead and `onDead` purges what the
   * router holds for it (0 = never). One that is healthy again within it keeps everything.
   */
  deadGraceMs?: number;
}

/**
 * Active health checks: GET <worker>/health on every worker every interval. A worker turns
 * unhealthy after `failureThreshold` consecutive failures and healthy again after
 * `successThreshold` consecutive passes; it stays registered and keeps its tree either way.
 */
export class HealthChecker {
  private timer: NodeJS.Timeout | undefined;
  /** stop() was called: a pass under way starts no more checks. */
  private stopped = false;
  private readonly running = new Set<Worker>();
  /** Checks in flight at once, first checks included (probe-slots.ts). */
  readonly slots = new ProbeSlots();
  /** When each unhealthy worker turned unhealthy (ms); purged ones are remembered apart. */
  private readonly unhealthySince = new Map<Worker, number>();
  private readonly purged = new Set<Worker>();
  /** A worker unhealthy for longer than deadGraceMs: what the router holds for it is dropped. */
  onDead: ((worker: Worker) => void) | undefined;
  /** A worker passed its first check, or turned healthy again (its engine is read then). */
  onReady: ((worker: Worker) => void) | undefined;

  /**
   * Per-worker lines that a large worker file or discovery change writes by the thousand: the
   * first of a burst as it comes, the rest counted into a summary every few seconds.
   */
  private readonly logs: Record<
    "firstPassed" | "firstFailed" | "unhealthy" | "healthyAgain" | "dead",
    LogDigest
  >;

  constructor(
    private readonly registry: WorkerRegistry,
    private readonly options: HealthOptions,
    logger: Logger,
    private readonly now: () => number = Date.now,
  ) {
    const digest = (level: "warn" | "info", message: string, summary: (n: number) => string) =>
      new LogDigest(logger, { level, message, summary });
    this.logs = {
      firstPassed: digest(
        "info",
        "worker answered its first health check: taking traffic",
        (n) => `${n} more workers answered their first health check: taking traffic`,
      ),
      firstFailed: digest(
        "warn",
        "worker failed its first health check: no traffic until it passes health checks",
        (n) =>
          `${n} more workers failed their first health check: no traffic to them until they pass health checks`,
      ),
      unhealthy: digest("warn", "worker unhealthy", (n) => `${n} more workers unhealthy`),
      healthyAgain: digest(
        "info",
        "worker healthy again",
        (n) => `${n} more workers healthy again`,
      ),
      dead: digest(
        "warn",
        "worker dead past the grace period: its index entries and cache account dropped",
        (n) =>
          `${n} more workers dead past the grace period: their index entries and cache account dropped`,
      ),
    };
  }

  start(): void {
    if (this.options.intervalMs <= 0 || this.timer) return;
    this.stopped = false;
    this.timer = setInterval(() => this.checkAll(), this.options.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    for (const digest of Object.values(this.logs)) digest.flush();
  }

  /** One check of every worker, spread over most of the interval (probe-slots.ts spreadOver). */
  async checkAll(): Promise<void> {
    await spreadOver(
      this.registry.list(),
      this.options.intervalMs * SPREAD_SHARE,
      (w) => this.check(w),
      () => this.stopped,
    );
    this.purgeDead();
  }

  /** Workers unhealthy for longer than the grace: purged once (until they are healthy again). */
  purgeDead(): void {
    const grace = this.options.deadGraceMs ?? 0;
    const now = this.now();
    for (const [worker, since] of this.unhealthySince) {
      if (worker.removed) {
        this.unhealthySince.delete(worker);
        this.purged.delete(worker);
        continue;
      }
      if (grace <= 0 || now - since < grace || this.purged.has(worker)) continue;
      this.purged.add(worker);
      this.logs.dead.note({ worker: worker.id, url: worker.url, unhealthy_ms: now - since });
      this.onDead?.(worker);
    }
  }

  /**
   * The first check of a worker, before it takes traffic (at start-up and when added through the
   * admin API): it is held back while the probe runs, one pass lets it in, and a failure keeps it
   * out until it passes `successThreshold` regular checks. The result is logged either way. With
   * health checks off (interval 0) the worker is trusted as given, since nothing would check it
   * again to let it back in. Bounded by the health check timeout.
   *
   * `fromPeer`: the worker came from another replica, not from this one's operator, so it is held
   * back until this replica's own probe passes even with checks off (then a failure keeps it out:
   * nothing checks it again).
   */
  async probeFirst(worker: Worker, options: { fromPeer?: boolean } = {}): Promise<boolean> {
    if (worker.removed) return false;
    // disable_health_check: the operator vouches for it; never probed.
    if (!worker.declared.healthChecks) return worker.healthy;
    if (this.options.intervalMs <= 0 && options.fromPeer !== true) {
      // Checks off: one check in the background, counted like any other (it alone never reaches
      // the failure threshold), so the worker is trusted as given.
      void this.check(worker);
      return worker.healthy;
    }
    worker.healthy = false;
    this.running.add(worker);
    let failure: string | undefined;
    try {
      failure = await this.probe(worker);
    } finally {
      this.running.delete(worker);
    }
    if (worker.removed) return false;
    const where = { worker: worker.id, url: worker.url };
    if (failure === undefined) {
      worker.healthy = true;
      worker.healthFailures = 0;
      worker.healthSuccesses = 1;
      this.logs.firstPassed.note(where);
      this.onReady?.(worker);
    } else {
      worker.healthFailures = 1;
      worker.healthSuccesses = 0;
      this.logs.firstFailed.note({
        ...where,
        reason: failure,
        success_threshold: this.options.successThreshold,
      });
    }
    return worker.healthy;
  }

  /** One check of one worker; concurrent checks of the same worker are not stacked. */
  async check(worker: Worker): Promise<void> {
    if (this.running.has(worker) || worker.removed || !worker.declared.healthChecks) return;
    this.running.add(worker);
    try {
      const failure = await this.probe(worker);
      this.record(worker, failure === undefined);
    } finally {
      this.running.delete(worker);
    }
  }

  /** undefined when the worker passed; else why not (status or error code), for the log. */
  private probe(worker: Worker): Promise<string | undefined> {
    return this.slots.run(() => this.probeNow(worker));
  }

  private async probeNow(worker: Worker): Promise<string | undefined> {
    if (worker.removed) return "removed";
    // A worker out of traffic keeps no idle connection between its checks, and one that has
    // never taken traffic no pool either (worker.ts probeClient).
    const outOfTraffic = !worker.healthy;
    const through = outOfTraffic
      ? worker.probeClient()
      : { dispatcher: worker.pool, oneShot: false };
    try {
      const res = await requestWorker(
        {
          pool: through.dispatcher,
          basePath: worker.basePath,
          authorization: worker.authorization,
        },
        this.options.endpoint ?? "/health",
        { timeoutMs: this.options.timeoutMs, closeAfter: outOfTraffic },
      );
      await res.body.dump();
      return res.statusCode >= 200 && res.statusCode < 300 ? undefined : `status ${res.statusCode}`;
    } catch (err) {
      const e = err as { code?: string; name?: string; message?: string };
      return e.code ?? e.name ?? e.message ?? "error";
    } finally {
      // The check's request has ended and its connection was closed after the answer.
      if (through.oneShot) through.dispatcher.close().catch(() => {});
    }
  }

  private record(worker: Worker, passed: boolean): void {
    if (worker.removed) return;
    if (passed) {
      worker.healthFailures = 0;
      worker.healthSuccesses += 1;
      if (!worker.healthy && worker.healthSuccesses >= this.options.successThreshold) {
        worker.healthy = true;
        this.unhealthySince.delete(worker);
        this.purged.delete(worker);
        this.logs.healthyAgain.note({ worker: worker.id, url: worker.url });
        this.onReady?.(worker);
      }
    } else {
      worker.healthSuccesses = 0;
      worker.healthFailures += 1;
      if (worker.healthy && worker.healthFailures >= this.options.failureThreshold) {
        worker.healthy = false;
        this.unhealthySince.set(worker, this.now());
        this.logs.unhealthy.note({
          worker: worker.id,
          url: worker.url,
          failures: worker.healthFailures,
        });
      }
    }
  }
}
