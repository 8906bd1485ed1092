/**
 * Per-tenant quotas when Redis answers too slowly (issue 24 follow-up): the quota check gives up
 * after its command timeout (250 ms) and the request goes on, counted on the replica's own
 * counters (fail open). Redis is made slow deterministically with CLIENT PAUSE from a second
 * connection: every command of the router's connection waits until the pause ends.
 */
import { Redis } from "ioredis";
import { describe, expect, it } from "vitest";
import { startSimWorker } from "../../sim/worker.js";
import { metric, startedPerTest } from "../faults/support.js";
import { redisSkipReason, startRedis, TEST_STATE_SECRET } from "../helpers/redis.js";
import { startTestRouter } from "../helpers/router.js";
import { quotaFile } from "../helpers/tenant-request.js";

/**
 * Longer than the test: the pause never ends while it runs (the server is killed at the end,
 * since an UNPAUSE would itself wait for the pause to end).
 */
const PAUSE_MS = 60_000;

function ask(routerUrl: string): Promise<Response> {
  return fetch(`${routerUrl}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-tenant-id": "t" },
    // ~100 prompt tokens and 10 generated: about 9 fit in the tenant's 1000 per minute.
    body: JSON.stringify({ model: "m", prompt: "t ".padEnd(400, "x"), max_tokens: 10 }),
  });
}

describe.skipIf(redisSkipReason !== undefined)(
  `--tenant-quota with a slow Redis${redisSkipReason ? ` (skipped: ${redisSkipReason})` : ""}`,
  () => {
    const started = startedPerTest();

    it("a quota check Redis does not answer in time admits the request on the local counters", async () => {
      const redis = await startRedis();
      const sim = await startSimWorker({ id: "w" });
      started.sims = [sim];
      const file = quotaFile("tenants:\n  t:\n    tokens_per_minute: 1000\n");
      const router = await startTestRouter({
        workerUrls: [sim.url],
        tenantQuota: file,
        stateUrl: redis.url,
        stateSecret: TEST_STATE_SECRET,
        stateKeyPrefix: `slow-quota-${process.pid}`,
      });
      const pauser = new Redis(redis.url, { lazyConnect: true, maxRetriesPerRequest: 1 });
      pauser.on("error", () => {});
      try {
        const first = await ask(router.url);
        await first.text();
        expect(first.status).toBe(200);
        expect(await metric(router.url, "radixgate_quota_shared")).toBe(1);
        expect(await metric(router.url, "radixgate_quota_redis_errors_total")).toBe(0);

        await pauser.connect();
        expect(await pauser.call("CLIENT", "PAUSE", String(PAUSE_MS), "ALL")).toBe("OK");
        // Admitted although Redis does not answer: the check timed out and failed open.
        const slow = await ask(router.url);
        await slow.text();
        expect(slow.status).toBe(200);
        expect(await metric(router.url, "radixgate_quota_redis_errors_total")).toBeGreaterThan(0);
        expect(await metric(router.url, "radixgate_quota_shared")).toBe(0);
        // Counted on the replica's own counters: the tenant's quota still holds there.
        const statuses: number[] = [];
        for (let i = 0; i < 15 && !statuses.includes(429); i++) {
          const res = await ask(router.url);
          await res.text();
          statuses.push(res.status);
        }
        expect(statuses.at(-1)).toBe(429);
        expect(statuses.length).toBeGreaterThanOrEqual(5);
      } finally {
        pauser.disconnect();
        await redis.kill();
        await router.stop(100);
        await redis.stop();
      }
    }, 40_000);
  },
);
