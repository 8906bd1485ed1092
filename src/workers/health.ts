import type { Logger } from "../logger.js";
import type { WorkerRegistry } from "./registry.js";
import type { Worker } from "./worker.js";

export interface HealthOptions {
  intervalMs: number;
  timeoutMs: number;
  failureThreshold: number;
  successThreshold: number;
  /** Path checked after the worker's base URL (SGLang and vLLM both answer /health). */
  endpoint?: string;
}

/**
 * Active health checks: GET <worker>/health on every worker every interval. A worker turns
 * unhealthy after `failureThreshold` consecutive failures and healthy again after
 * `successThreshold` consecutive passes; it stays registered and keeps its tree either way.
 */
export class HealthChecker {
  private timer: NodeJS.Timeout | undefined;
  private readonly running = new Set<Worker>();

  constructor(
    private readonly registry: WorkerRegistry,
    private readonly options: HealthOptions,
    private readonly logger: Logger,
  ) {}

  start(): void {
    if (this.options.intervalMs <= 0 || this.timer) return;
    this.timer = setInterval(() => this.checkAll(), this.options.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  checkAll(): Promise<void> {
    return Promise.all(this.registry.list().map((w) => this.check(w))).then(() => {});
  }

  /** One check of one worker; concurrent checks of the same worker are not stacked. */
  async check(worker: Worker): Promise<void> {
    if (this.running.has(worker) || worker.removed) return;
    this.running.add(worker);
    try {
      const passed = await this.probe(worker);
      this.record(worker, passed);
    } finally {
      this.running.delete(worker);
    }
  }

  private async probe(worker: Worker): Promise<boolean> {
    try {
      const res = await worker.pool.request({
        method: "GET",
        path: `${worker.basePath}${this.options.endpoint ?? "/health"}`,
        ...(worker.authorization !== undefined
          ? { headers: { authorization: worker.authorization } }
          : {}),
        signal: AbortSignal.timeout(this.options.timeoutMs),
        headersTimeout: this.options.timeoutMs,
        bodyTimeout: this.options.timeoutMs,
      });
      await res.body.dump();
      return res.statusCode >= 200 && res.statusCode < 300;
    } catch {
      return false;
    }
  }

  private record(worker: Worker, passed: boolean): void {
    if (worker.removed) return;
    if (passed) {
      worker.healthFailures = 0;
      worker.healthSuccesses += 1;
      if (!worker.healthy && worker.healthSuccesses >= this.options.successThreshold) {
        worker.healthy = true;
        this.logger.info({ worker: worker.id, url: worker.url }, "worker healthy again");
      }
    } else {
      worker.healthSuccesses = 0;
      worker.healthFailures += 1;
      if (worker.healthy && worker.healthFailures >= this.options.failureThreshold) {
        worker.healthy = false;
        this.logger.warn(
          { worker: worker.id, url: worker.url, failures: worker.healthFailures },
          "worker unhealthy",
        );
      }
    }
  }
}
