/** The Redis quota store against a real redis-server: leases of a replica that died lapse. */
import { describe, expect, it } from "vitest";
import { createLogger } from "../../src/logger.js";
import { LocalQuotaStore } from "../../src/quotas/local-quota-store.js";
import type { QuotaVerdict } from "../../src/quotas/quota-store.js";
import { RedisQuotaStore } from "../../src/quotas/redis-quota-store.js";
import { redisSkipReason, startRedis } from "../helpers/redis.js";
import { waitFor } from "../helpers/router.js";

describe.skipIf(redisSkipReason !== undefined)("RedisQuotaStore", () => {
  it("a crashed replica's concurrency leases lapse after their TTL; a live one's are renewed", async () => {
    const redis = await startRedis();
    const store = (leaseTtlMs: number) =>
      new RedisQuotaStore(
        { url: redis.url, keyPrefix: "lapse", leaseTtlMs, onError: () => {}, onShared: () => {} },
        new LocalQuotaStore(),
        createLogger({ level: "silent" }),
      );
    const crashed = store(300);
    const live = store(300);
    try {
      await crashed.start();
      await live.start();
      const limits = { concurrentRequests: 2 };
      const first = (await crashed.acquire("t", limits, 0, "crashed:1")) as QuotaVerdict;
      const second = (await live.acquire("t", limits, 0, "live:1")) as QuotaVerdict;
      expect(first.admitted && second.admitted).toBe(true);
      expect((await live.acquire("t", limits, 0, "live:2")).admitted).toBe(false);
      crashed.stop(); // no release, no renewal: as if the process died
      // The crashed replica's place comes back; the live one's lease is renewed and stays.
      await waitFor(
        async () => (await live.acquire("t", { concurrentRequests: 2 }, 0, "live:3")).admitted,
        5000,
        "the crashed lease lapsing",
      );
      await new Promise((resolve) => setTimeout(resolve, 600));
      expect(await redis.client.zrange("lapse:quota:t:leases", 0, -1)).toEqual(
        expect.arrayContaining(["live:1", "live:3"]),
      );
    } finally {
      crashed.stop();
      live.stop();
      await redis.stop();
    }
  }, 20_000);
});
