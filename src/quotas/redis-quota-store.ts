import { Redis } from "ioredis";
import type { Logger } from "../logger.js";
import type { LocalQuotaStore } from "./local-quota-store.js";
import { CONCURRENCY_RETRY_MS } from "./local-quota-store.js";
import type { QuotaLimits } from "./quota-file.js";
import type { QuotaLease, QuotaStore, QuotaUsage, QuotaVerdict } from "./quota-store.js";
import { ACQUIRE, RELEASE, RENEW } from "./redis-quota-scripts.js";
import { msUntilFits, WINDOW_MS, windowIndex } from "./window.js";

export interface RedisQuotaOptions {
  /** --state-url (never logged). */
  url: string;
  /** --state-key-prefix */
  keyPrefix: string;
  /** Longest wait for Redis on a request's path before it goes on with the local counters. */
  commandTimeoutMs?: number;
  /** A lease not renewed for this long lapses (a crashed replica's requests). */
  leaseTtlMs?: number;
  /** After a failure, the local counters are used this long before Redis is tried again. */
  retryAfterFailureMs?: number;
  onError(): void;
  onShared(shared: boolean): void;
}

interface ScriptedRedis extends Redis {
  quotaAcquire(...args: (string | number)[]): Promise<number[]>;
  quotaRelease(...args: (string | number)[]): Promise<number>;
  quotaRenew(...args: (string | number)[]): Promise<number>;
}

/** A lease taken in Redis (a local one is counted by the fallback store). */
interface SharedLease extends QuotaLease {
  readonly shared: true;
}

/**
 * Quotas shared by the replicas of one fleet through Redis (--state-url): one atomic script per
 * admission and one per end (redis-quota-scripts.ts), on a connection of their own.
 *
 * Fail open: when Redis cannot be reached or does not answer within the command timeout, the
 * request is not refused for it: it is counted on this replica's own counters (as without
 * --state-url: each replica then allows the whole quota), the error is counted and logged once
 * per outage, and Redis is tried again after a few seconds.
 */
export class RedisQuotaStore implements QuotaStore {
  private readonly client: ScriptedRedis;
  private readonly keys: (tenant: string) => [string, string];
  private readonly leaseTtlMs: number;
  private readonly retryAfterFailureMs: number;
  /** Shared leases under way, by tenant: renewed while their requests run. */
  private readonly running = new Map<string, Set<string>>();
  /** What Redis last answered for each tenant (the usage gauges). */
  private readonly seen = new Map<string, QuotaUsage>();
  private renewTimer: NodeJS.Timeout | undefined;
  private failedUntil = 0;
  private degraded = false;

  constructor(
    private readonly options: RedisQuotaOptions,
    private readonly local: LocalQuotaStore,
    private readonly logger: Logger,
  ) {
    this.leaseTtlMs = options.leaseTtlMs ?? 30_000;
    this.retryAfterFailureMs = options.retryAfterFailureMs ?? 5000;
    const prefix = `${options.keyPrefix}:quota`;
    this.keys = (tenant) => [`${prefix}:${tenant}:leases`, `${prefix}:${tenant}:tokens`];
    this.client = new Redis(options.url, {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: options.commandTimeoutMs ?? 250,
      connectTimeout: 2000,
      retryStrategy: (times) =>
        Math.round(Math.min(2000, 50 * 2 ** Math.min(times, 10)) * (0.5 + Math.random() / 2)),
      lazyConnect: true,
      connectionName: "radixgate-quotas",
    }) as ScriptedRedis;
    this.client.on("error", () => {});
    this.client.defineCommand("quotaAcquire", { numberOfKeys: 2, lua: ACQUIRE });
    this.client.defineCommand("quotaRelease", { numberOfKeys: 2, lua: RELEASE });
    this.client.defineCommand("quotaRenew", { numberOfKeys: 1, lua: RENEW });
    this.client.on("ready", () => this.recovered());
  }

  /** Connects (bounded: never throws) and starts renewing leases. */
  async start(): Promise<void> {
    await this.client.connect().catch(() => this.failed());
    this.options.onShared(this.client.status === "ready");
    this.renewTimer = setInterval(() => this.renew(), this.leaseTtlMs / 3);
    this.renewTimer.unref();
  }

  stop(): void {
    clearInterval(this.renewTimer);
    this.client.disconnect();
  }

  acquire(
    tenant: string,
    limits: QuotaLimits,
    cost: number,
    leaseId: string,
  ): QuotaVerdict | Promise<QuotaVerdict> {
    if (this.client.status !== "ready" || Date.now() < this.failedUntil) {
      this.options.onShared(false);
      return this.local.acquire(tenant, limits, cost, leaseId);
    }
    const [leases, tokens] = this.keys(tenant);
    return this.client
      .quotaAcquire(
        leases,
        tokens,
        limits.tokensPerMinute ?? 0,
        limits.concurrentRequests ?? 0,
        cost,
        leaseId,
        WINDOW_MS,
        this.leaseTtlMs,
      )
      .then(
        (reply) => this.verdict(tenant, limits, cost, leaseId, reply),
        () => {
          this.failed();
          return this.local.acquire(tenant, limits, cost, leaseId);
        },
      );
  }

  private verdict(
    tenant: string,
    limits: QuotaLimits,
    cost: number,
    leaseId: string,
    reply: number[],
  ): QuotaVerdict {
    const [code = 0, now = Date.now(), prev = 0, cur = 0, running = 0] = reply.map(Number);
    const usage = { prev, cur, at: now, running };
    this.seen.set(tenant, usage);
    if (this.degraded) this.recovered();
    if (code === 1) {
      return {
        admitted: false,
        reason: "quota_concurrency",
        retryAfterMs: CONCURRENCY_RETRY_MS,
        usage,
      };
    }
    if (code === 2) {
      const tpm = limits.tokensPerMinute ?? 0;
      return {
        admitted: false,
        reason: "quota_tokens",
        retryAfterMs: msUntilFits(prev, cur, cost, tpm, now),
        usage,
      };
    }
    let ids = this.running.get(tenant);
    if (ids === undefined) {
      ids = new Set();
      this.running.set(tenant, ids);
    }
    ids.add(leaseId);
    const lease: SharedLease = {
      tenant,
      id: leaseId,
      window: windowIndex(now),
      counted: true,
      shared: true,
    };
    return { admitted: true, lease, usage };
  }

  release(lease: QuotaLease, refund: number, extra: number): void {
    if (!(lease as Partial<SharedLease>).shared) {
      this.local.release(lease, refund, extra);
      return;
    }
    const ids = this.running.get(lease.tenant);
    ids?.delete(lease.id);
    if (ids?.size === 0) this.running.delete(lease.tenant);
    if (this.client.status !== "ready") return; // its lease lapses in Redis on its own
    const [leases, tokens] = this.keys(lease.tenant);
    this.client
      .quotaRelease(leases, tokens, lease.id, lease.window, refund, extra, WINDOW_MS)
      .catch(() => this.failed());
  }

  *usage(): Iterable<[string, QuotaUsage]> {
    yield* this.seen;
    for (const entry of this.local.usage()) if (!this.seen.has(entry[0])) yield entry;
  }

  forget(tenant: string): void {
    this.seen.delete(tenant);
    this.local.forget(tenant);
  }

  /** Moves the expiry of every lease still running on (one script per tenant). */
  private renew(): void {
    if (this.client.status !== "ready") return;
    for (const [tenant, ids] of this.running) {
      const [leases] = this.keys(tenant);
      this.client.quotaRenew(leases, this.leaseTtlMs, ...ids).catch(() => this.failed());
    }
  }

  private failed(): void {
    this.options.onError();
    this.failedUntil = Date.now() + this.retryAfterFailureMs;
    this.options.onShared(false);
    if (this.degraded) return;
    this.degraded = true;
    this.logger.warn(
      "tenant quotas: Redis unreachable or too slow; counting on this replica's own counters (requests are not refused for it) until it answers again",
    );
  }

  private recovered(): void {
    this.failedUntil = 0;
    this.options.onShared(true);
    if (!this.degraded) return;
    this.degraded = false;
    this.logger.info("tenant quotas: counting in Redis again");
  }
}
