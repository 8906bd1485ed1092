import { afterAll, describe, expect, it } from "vitest";
import { createLogger } from "../../src/logger.js";
import { LoadSync, loadTtlMs } from "../../src/state/load-sync.js";
import { RedisLink } from "../../src/state/redis-link.js";
import { stateKeys } from "../../src/state/state-keys.js";
import { StateSecret } from "../../src/state/state-secret.js";
import { redisSkipReason, TEST_STATE_SECRET } from "../helpers/redis.js";
import { replicaFleet } from "../helpers/replica-fleet.js";

describe("a load value's life", () => {
  it("is three intervals, and never under 750 ms", () => {
    expect(loadTtlMs(50)).toBe(750);
    expect(loadTtlMs(250)).toBe(750);
    expect(loadTtlMs(1000)).toBe(3000);
  });
});

// At the default 50 ms interval, three intervals are 150 ms: a replica whose event loop stalls
// longer than that (a large body parsed, a GC pause) would drop out of its peers' view, and the
// rank (who leads) would move and move back.
describe.skipIf(redisSkipReason !== undefined)(
  `a replica that pauses publishing${redisSkipReason ? ` (skipped: ${redisSkipReason})` : ""}`,
  () => {
    const fleet = replicaFleet(2);
    const links: RedisLink[] = [];
    const syncs: LoadSync[] = [];
    afterAll(async () => {
      await Promise.allSettled(syncs.map((s) => s.stop()));
      await Promise.allSettled(links.map((l) => l.close()));
    });

    const replica = async (prefix: string, replicaId: string, startedAt: number) => {
      const link = new RedisLink({ url: fleet.redis.url }, createLogger({ level: "silent" }));
      links.push(link);
      await link.connect();
      const sync = new LoadSync(link, {
        replicaId,
        keys: stateKeys(prefix),
        intervalMs: 50, // ticks are explicit here: no timer is started
        workers: () => [],
        secret: new StateSecret(TEST_STATE_SECRET),
        startedAt,
      });
      syncs.push(sync);
      return sync;
    };

    it("keeps its rank through a 400 ms stall, and loses it once its value expires", async () => {
      const prefix = `rg-test-ttl-${process.pid}-${Date.now()}`;
      const first = await replica(prefix, "first", 1000);
      const second = await replica(prefix, "second", 2000);
      await first.tick();
      await second.tick();
      expect(second.rank).toBe(1);
      // The first stops publishing for 400 ms: past three intervals, within the floor.
      await new Promise((r) => setTimeout(r, 400));
      await second.tick();
      expect(second.rank).toBe(1);
      // Past the floor its value is gone: the second now leads.
      await new Promise((r) => setTimeout(r, 500));
      await second.tick();
      expect(second.rank).toBe(0);
    });
  },
);
