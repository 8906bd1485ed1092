import { randomBytes } from "node:crypto";
import type { Registry } from "prom-client";
import type { QuotaRefusalReason } from "../admission/admission-metrics.js";
import type { RequestIdentity, TenantTable } from "../admission/identity.js";
import type { Logger } from "../logger.js";
import { LocalQuotaStore } from "./local-quota-store.js";
import type { QuotaTable } from "./quota-file.js";
import { QuotaFileSource } from "./quota-file-source.js";
import { QuotaMetrics } from "./quota-metrics.js";
import { QuotaStep } from "./quota-step.js";
import { RedisQuotaStore } from "./redis-quota-store.js";

export interface TenantQuotaOptions {
  /** --tenant-quota */
  file: string;
  /** --state-url and --state-key-prefix: quotas shared by the replicas; without, per process. */
  shared?: { url: string; keyPrefix: string };
}

export interface TenantQuotaDeps {
  registry: Registry;
  logger: Logger;
  tenants: TenantTable;
  /** The fleet's learned characters per prompt token. */
  charsPerToken(): number;
  refused(identity: RequestIdentity, reason: QuotaRefusalReason): void;
}

/**
 * Per-tenant quotas, assembled: the file (read now: a bad one throws a ConfigError), the store
 * (Redis with --state-url, else this process), the admission step, the metrics. start() watches
 * the file and connects to Redis; stop() ends both.
 */
export class TenantQuotas {
  readonly step: QuotaStep;
  private readonly source: QuotaFileSource;
  private readonly redis: RedisQuotaStore | undefined;
  private table: QuotaTable;
  private readonly tenants: TenantTable;

  constructor(options: TenantQuotaOptions, deps: TenantQuotaDeps) {
    const local = new LocalQuotaStore();
    let metrics: QuotaMetrics | undefined;
    this.source = new QuotaFileSource(
      options.file,
      (table) => this.apply(table),
      deps.logger,
      (outcome) => metrics?.fileReloads.inc({ outcome }),
    );
    this.table = this.source.initial;
    const shared = options.shared;
    this.redis =
      shared === undefined
        ? undefined
        : new RedisQuotaStore(
            {
              url: shared.url,
              keyPrefix: shared.keyPrefix,
              onError: () => metrics?.storeErrors.inc(),
              onShared: (up) => metrics?.setShared(up),
            },
            local,
            deps.logger,
          );
    const store = this.redis ?? local;
    metrics = new QuotaMetrics(deps.registry, store, () => this.table);
    metrics.setShared(false);
    this.step = new QuotaStep(
      this.table,
      store,
      { charsPerToken: deps.charsPerToken, refused: deps.refused },
      // Lease ids unique across replicas (and restarts of this one).
      shared === undefined ? "" : `${randomBytes(6).toString("hex")}:`,
    );
    this.tenants = deps.tenants;
    this.tenants.pin(new Set(this.table.tenants.keys()));
    this.tenants.onForget((tenant) => store.forget(tenant));
  }

  private apply(table: QuotaTable): void {
    this.table = table;
    this.step.setTable(table);
    this.tenants.pin(new Set(table.tenants.keys()));
  }

  async start(): Promise<void> {
    this.source.start();
    await this.redis?.start();
  }

  stop(): void {
    this.source.stop();
    this.redis?.stop();
  }
}
