import { randomBytes } from "node:crypto";
import { afterAll, describe, expect, it } from "vitest";
import { createLogger } from "../../src/logger.js";
import type { RunningRouter } from "../../src/server.js";
import { LoadSync } from "../../src/state/load-sync.js";
import { RedisLink } from "../../src/state/redis-link.js";
import { stateKeys } from "../../src/state/state-keys.js";
import { StateSecret } from "../../src/state/state-secret.js";
import { redisSkipReason, TEST_STATE_SECRET } from "../helpers/redis.js";
import { replicaFleet } from "../helpers/replica-fleet.js";
import { postChat, waitFor } from "../helpers/router.js";

// Issue 20 item 10, the cell that missed: cache_aware on cache-pressure with 4 replicas, 7 points
// under one router. Peers' in-flight counts are read every --state-load-interval-ms; the load
// bound (cacheLoadBound × mean + 1) tripped on those old counts and every replica diverted the
// same prefixes at once. The bound now weighs this replica's own, exact counts.
describe.skipIf(redisSkipReason !== undefined)(
  `cache_aware's load bound with replicas${redisSkipReason ? ` (skipped: ${redisSkipReason})` : ""}`,
  () => {
    const fleet = replicaFleet(4);
    let router: RunningRouter | undefined;
    const links: RedisLink[] = [];
    const syncs: LoadSync[] = [];

    // Runs before the fleet's afterAll (hooks unwind in reverse): peers stop before Redis does.
    afterAll(async () => {
      await Promise.allSettled(syncs.map((s) => s.stop()));
      await Promise.allSettled(links.map((l) => l.close()));
    });

    /** A peer replica that publishes the given in-flight counts, as its LoadSync does. */
    const peerPublishing = async (prefix: string, counts: Record<string, number>) => {
      const link = new RedisLink({ url: fleet.redis.url }, createLogger({ level: "silent" }));
      links.push(link);
      await link.connect();
      const sync = new LoadSync(link, {
        replicaId: "peer",
        keys: stateKeys(prefix),
        intervalMs: 60_000, // one explicit tick; its count then lives 3 minutes
        workers: () =>
          Object.entries(counts).map(([id, n]) => ({
            id,
            ownInFlight: n,
            setPeerInFlight: () => {},
          })),
        secret: new StateSecret(TEST_STATE_SECRET),
      });
      syncs.push(sync);
      await sync.tick();
    };

    const tenant = `You are the assistant of tenant acme. ${"Follow the tenant's policies to the letter. ".repeat(40)}`;
    const ask = async (question: string) => {
      const res = await postChat(router!, tenant, question);
      expect(res.status).toBe(200);
      await res.text();
      return {
        worker: res.headers.get("x-radixgate-worker")!,
        route: res.headers.get("x-radixgate-route")!,
      };
    };

    it("keeps a prefix on its worker when only peers' counts (as last read) put it over the bound", async () => {
      const prefix = `l${randomBytes(4).toString("hex")}`;
      router = await fleet.replica(prefix, { stateLoadIntervalMs: 20 });
      const first = await ask("What is the refund policy?");
      const home = router.context.registry.list().find((w) => w.id === first.worker)!;
      expect(home).toBeDefined();

      // A peer's last published count puts 13 requests on the prefix's worker: over
      // 2 × (13 / 4) + 1 fleet-wide, while this replica itself has nothing in flight anywhere.
      await peerPublishing(prefix, { [home.id]: 13 });
      await waitFor(() => home.peerInFlight === 13, 5000);

      const next = await ask("And for an order placed yesterday?");
      expect(next.route).toContain("cache_hit");
      expect(next.worker).toBe(home.id);
    });
  },
);
