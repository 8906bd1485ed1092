import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "../../src/logger.js";
import { LoadSync } from "../../src/state/load-sync.js";
import { PeerInFlight } from "../../src/state/peer-in-flight.js";
import { RedisLink } from "../../src/state/redis-link.js";
import { stateKeys } from "../../src/state/state-keys.js";
import { StateSecret } from "../../src/state/state-secret.js";
import {
  redisSkipReason,
  startRedis,
  TEST_STATE_SECRET,
  type TestRedis,
} from "../helpers/redis.js";

// radixgate-cluster with --state-url: its processes' counts reach each other over the local
// channel, so what they read from Redis must leave each other out, or a sibling's requests would
// weigh twice on a worker.
describe.skipIf(redisSkipReason !== undefined)(
  `a cluster's processes in Redis${redisSkipReason ? ` (skipped: ${redisSkipReason})` : ""}`,
  () => {
    let redis: TestRedis;
    const links: RedisLink[] = [];
    const syncs: LoadSync[] = [];

    beforeAll(async () => {
      redis = await startRedis();
    });

    afterAll(async () => {
      await Promise.allSettled(syncs.map((s) => s.stop()));
      await Promise.allSettled(links.map((l) => l.close()));
      await redis?.stop();
    });

    it("leaves the siblings' published counts out of the peers' sum read from Redis", async () => {
      const keys = stateKeys("sibling-load");
      const seen = new Map<string, number>();
      const replica = async (id: string, count: number, group?: string) => {
        const link = new RedisLink({ url: redis.url }, createLogger({ level: "silent" }));
        links.push(link);
        await link.connect();
        const sync = new LoadSync(link, {
          replicaId: id,
          keys,
          intervalMs: 60_000, // explicit ticks only
          workers: () => [
            {
              id: "w1",
              ownInFlight: count,
              setPeerInFlight: (n: number) => {
                if (id === "g1.a") seen.set("w1", n);
              },
            },
          ],
          secret: new StateSecret(TEST_STATE_SECRET),
          ...(group !== undefined
            ? { skipReplica: (peer: string) => peer !== id && peer.startsWith(`${group}.`) }
            : {}),
        });
        syncs.push(sync);
        return sync;
      };
      const a = await replica("g1.a", 1, "g1");
      const b = await replica("g1.b", 2, "g1");
      const other = await replica("elsewhere", 4);
      await b.tick();
      await other.tick();
      await a.tick();
      // Only the replica on another host counts: g1.b's 2 arrive over the local channel.
      expect(seen.get("w1")).toBe(4);
    });

    it("a worker's peer count is the siblings' part plus the Redis part", () => {
      const set: number[] = [];
      const worker = { id: "w1", setPeerInFlight: (n: number) => set.push(n) };
      const peers = new PeerInFlight();
      peers.set("siblings", worker, 2);
      peers.set("redis", worker, 4);
      peers.set("siblings", worker, 0);
      expect(set).toEqual([2, 6, 4]);
    });
  },
);
