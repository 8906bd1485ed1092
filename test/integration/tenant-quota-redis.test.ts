/**
 * Per-tenant quotas shared by two router replicas through a real redis-server (--state-url), and
 * what happens when Redis goes away (fail open to each replica's own counters).
 */
import { describe, expect, it } from "vitest";
import { startSimWorker } from "../../sim/worker.js";
import type { RunningRouter } from "../../src/server.js";
import { metric, startedPerTest } from "../faults/support.js";
import {
  redisSkipReason,
  startRedis,
  TEST_STATE_SECRET,
  type TestRedis,
} from "../helpers/redis.js";
import { startTestRouter } from "../helpers/router.js";
import { askAsTenant as ask, quotaFile } from "../helpers/tenant-request.js";

let prefixes = 0;

async function replicas(
  redis: TestRedis,
  quota: string,
  workerUrl: string,
): Promise<RunningRouter[]> {
  const file = quotaFile(quota);
  const prefix = `quota-test-${process.pid}-${++prefixes}`;
  const start = () =>
    startTestRouter({
      workerUrls: [workerUrl],
      tenantQuota: file,
      stateUrl: redis.url,
      stateSecret: TEST_STATE_SECRET,
      stateKeyPrefix: prefix,
    });
  return [await start(), await start()];
}

describe.skipIf(redisSkipReason !== undefined)(
  `--tenant-quota shared through Redis${redisSkipReason ? ` (skipped: ${redisSkipReason})` : ""}`,
  () => {
    const started = startedPerTest();

    it("two replicas share one tenant's tokens per minute: the sum over both is bounded", async () => {
      const redis = await startRedis();
      const sim = await startSimWorker({ id: "w" });
      started.sims = [sim];
      const routers = await replicas(
        redis,
        "tenants:\n  flood:\n    tokens_per_minute: 1000\n",
        sim.url,
      );
      try {
        // ~110 tokens a request (~100 prompt, 10 generated): about 9 fit in 1000 over both
        // replicas, where each replica alone would let about 9 through (18 in all).
        const served = [0, 0];
        const refused = [0, 0];
        for (let i = 0; i < 24; i++) {
          const side = i % 2;
          const res = await ask((routers[side] as RunningRouter).url, "flood");
          await res.text();
          if (res.status === 200) served[side] = (served[side] ?? 0) + 1;
          else if (res.status === 429) refused[side] = (refused[side] ?? 0) + 1;
        }
        const total = (served[0] ?? 0) + (served[1] ?? 0);
        expect(total).toBeGreaterThanOrEqual(6);
        expect(total).toBeLessThanOrEqual(10);
        expect(refused[0]).toBeGreaterThan(0);
        expect(refused[1]).toBeGreaterThan(0);
        for (const router of routers) {
          expect(await metric(router.url, "radixgate_quota_shared")).toBe(1);
          expect(await metric(router.url, "radixgate_quota_redis_errors_total")).toBe(0);
        }
        // Another tenant is not affected.
        expect((await ask((routers[1] as RunningRouter).url, "chat")).status).toBe(200);
      } finally {
        for (const router of routers) await router.stop(100);
        await redis.stop();
      }
    }, 30_000);

    it("two replicas share one tenant's concurrent requests", async () => {
      const redis = await startRedis();
      const sim = await startSimWorker({ id: "w" });
      started.sims = [sim];
      const routers = await replicas(redis, "others:\n  concurrent_requests: 2\n", sim.url);
      const [a, b] = routers as [RunningRouter, RunningRouter];
      try {
        const streams = await Promise.all([
          ask(a.url, "agent", { maxTokens: 2000, stream: true }),
          ask(b.url, "agent", { maxTokens: 2000, stream: true }),
        ]);
        const readers = streams.map((s) => s.body?.getReader());
        for (const reader of readers) await reader?.read();
        for (const router of routers) {
          const third = await ask(router.url, "agent");
          expect(third.status).toBe(429);
          expect(((await third.json()) as { error: { code: string } }).error.code).toBe(
            "tenant_concurrency_exceeded",
          );
        }
        expect(
          await redis.client.zcard(`${"quota-test"}-${process.pid}-${prefixes}:quota:agent:leases`),
        ).toBe(2);
        for (const reader of readers) await reader?.cancel();
      } finally {
        for (const router of routers) await router.stop(100);
        await redis.stop();
      }
    }, 30_000);

    it("fails open when Redis goes away: requests are counted on each replica's own counters", async () => {
      const redis = await startRedis();
      const sim = await startSimWorker({ id: "w" });
      started.sims = [sim];
      const routers = await replicas(
        redis,
        "tenants:\n  t:\n    tokens_per_minute: 1000\n",
        sim.url,
      );
      const [a, b] = routers as [RunningRouter, RunningRouter];
      try {
        // Spend the shared quota.
        let refused = false;
        for (let i = 0; i < 20 && !refused; i++) {
          const res = await ask(routers[i % 2]?.url ?? a.url, "t");
          await res.text();
          refused = res.status === 429;
        }
        expect(refused).toBe(true);
        await redis.kill();
        // Not refused for Redis: each replica counts on its own (fresh) counters, so the tenant is
        // served again, up to its quota per replica.
        const statuses: number[] = [];
        for (let i = 0; i < 4; i++) {
          const res = await ask(routers[i % 2]?.url ?? a.url, "t");
          await res.text();
          statuses.push(res.status);
        }
        expect(statuses).toEqual([200, 200, 200, 200]);
        for (const router of [a, b])
          expect(await metric(router.url, "radixgate_quota_shared")).toBe(0);
      } finally {
        for (const router of routers) await router.stop(100);
        await redis.stop();
      }
    }, 30_000);
  },
);
