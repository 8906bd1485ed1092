import { RouterError } from "../errors.js";
import type { KvEventsManager } from "../kv-events/manager.js";
import { LogDigest } from "../log-digest.js";
import type { Logger } from "../logger.js";
import type { HealthChecker } from "../workers/health.js";
import type { WorkerRegistry } from "../workers/registry.js";
import type { Worker } from "../workers/worker.js";
import { REGULAR_ROLE, type WorkerType } from "../workers/worker-role.js";
import { checkedKvEndpoints, type KvEndpointRules, type WorkerSpec } from "./worker-spec.js";

export interface MembershipDeps {
  registry: WorkerRegistry;
  health: HealthChecker;
  logger: Logger;
  /** --kv-events: where a worker's KV-event endpoints go. */
  kvEvents?: KvEventsManager;
  kvRules: KvEndpointRules;
  /**
   * The worker types this router routes to: regular only, or prefill and decode with
   * --pd-disaggregation (disaggregation/). A worker of another type is refused, since no request
   * would ever reach it. Default: regular only.
   */
  workerTypes?: readonly WorkerType[];
}

/**
 * The one way workers join and leave at run time, shared by the admin API and the discovery
 * sources: the registry's checks (canonical URL, link-local refusal, the router's own address,
 * duplicates), then a health check before the worker takes traffic.
 */
export class WorkerMembership {
  /** A file or discovery change adds or removes thousands at once: a summary line for most. */
  private readonly addedLines: LogDigest;
  private readonly removedLines: LogDigest;

  constructor(private readonly deps: MembershipDeps) {
    this.addedLines = new LogDigest(deps.logger, {
      level: "info",
      message: "worker added",
      summary: (n) => `${n} more workers added`,
    });
    this.removedLines = new LogDigest(deps.logger, {
      level: "info",
      message: "worker removed",
      summary: (n) => `${n} more workers removed`,
    });
  }

  /** Writes the summaries held back (at shutdown). */
  flushLogs(): void {
    this.addedLines.flush();
    this.removedLines.flush();
  }

  /** Adds a worker; `source` (admin, file, dns) goes in the log line. */
  async add(spec: WorkerSpec, source: string): Promise<Worker> {
    const { registry, health, kvEvents } = this.deps;
    const role = spec.role ?? REGULAR_ROLE;
    const types = this.deps.workerTypes ?? ["regular"];
    if (!types.includes(role.type)) {
      throw new RouterError(
        "invalid_request",
        role.type === "regular"
          ? "This router runs prefill/decode disaggregation: give the worker a worker_type of prefill or decode."
          : `worker_type ${role.type} needs the router started with --pd-disaggregation (or --vllm-pd-disaggregation).`,
      );
    }
    if (spec.kvEndpoints !== undefined && kvEvents === undefined) {
      throw new RouterError(
        "invalid_request",
        "kv_events_endpoint needs the router started with --kv-events.",
      );
    }
    // Checked before the worker is added: a refused endpoint leaves nothing registered.
    const checked =
      spec.kvEndpoints === undefined
        ? undefined
        : await checkedKvEndpoints(spec.kvEndpoints, this.deps.kvRules);
    const worker = await registry.addResolved(spec.url, {
      ...(spec.apiKey !== undefined ? { apiKey: spec.apiKey } : {}),
      role,
    });
    this.addedLines.note({ worker: worker.id, url: worker.url, source, worker_type: role.type });
    if (spec.declared !== undefined) worker.declare(spec.declared);
    // Probed before it takes traffic; the admin API's answer reports the result ("healthy").
    await health.probeFirst(worker);
    if (checked !== undefined) kvEvents?.configure(worker, checked);
    return worker;
  }

  /** Unregisters a worker: no new requests, in-flight ones complete (WorkerRegistry.remove). */
  remove(idOrUrl: string, source: string): Worker | undefined {
    const worker = this.deps.registry.remove(idOrUrl);
    if (worker === undefined) return undefined;
    this.removedLines.note({
      worker: worker.id,
      url: worker.url,
      in_flight: worker.inFlight,
      source,
    });
    return worker;
  }
}
