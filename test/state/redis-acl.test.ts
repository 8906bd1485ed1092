import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import type { RunningRouter } from "../../src/server.js";
import {
  redisSkipReason,
  startRedis,
  TEST_STATE_SECRET,
  type TestRedis,
} from "../helpers/redis.js";
import { postJson, startTestRouter, waitFor } from "../helpers/router.js";

/**
 * The Redis ACL that docs/deployment.md gives the routers: their keys only, the commands they
 * use and nothing else. If the router starts using another command, this test fails (ACL LOG)
 * and the documented rule must change with it.
 */
export const ROUTER_ACL = [
  "on",
  "resetkeys",
  "~fleet1:*",
  "resetchannels",
  "-@all",
  "+xadd",
  "+xread",
  "+xinfo|stream",
  "+hset",
  "+hdel",
  "+hscan",
  "+get",
  "+set",
  "+mget",
  "+del",
  "+sadd",
  "+srem",
  "+smembers",
  "+info",
  "+select",
  "+ping",
  "+client|setname",
];

describe.skipIf(redisSkipReason !== undefined)(
  `the documented Redis ACL${redisSkipReason ? ` (skipped: ${redisSkipReason})` : ""}`,
  () => {
    let redis: TestRedis;
    let workers: SimWorker[];
    const routers: RunningRouter[] = [];

    beforeAll(async () => {
      redis = await startRedis();
      workers = await Promise.all([1, 2].map((i) => startSimWorker({ id: `w${i}`, timeScale: 0 })));
      await redis.client.call("ACL", "SETUSER", "radixgate", ...ROUTER_ACL, ">router-password");
      await redis.client.call("ACL", "LOG", "RESET");
    });

    afterAll(async () => {
      await Promise.allSettled(routers.map((r) => r.stop(100)));
      await Promise.allSettled(workers.map((w) => w.close()));
      await redis?.stop();
    });

    it("is enough for two replicas to share decisions and workers, and nothing it denies is tried", async () => {
      const replica = async () => {
        const router = await startTestRouter({
          policy: "cache_aware",
          workerUrls: [workers[0]!.url],
          stateUrl: `redis://radixgate:router-password@127.0.0.1:${redis.port}/0`,
          stateSecret: TEST_STATE_SECRET,
          stateKeyPrefix: "fleet1",
          stateLoadIntervalMs: 50,
        });
        routers.push(router);
        return router;
      };
      const a = await replica();
      const b = await replica();
      const added = await postJson(`${a.url}/workers`, { url: workers[1]!.url });
      expect(added.status).toBe(201);
      await waitFor(() => b.context.registry.get(workers[1]!.url) !== undefined, 10_000, "add");
      const res = await postJson(`${a.url}/v1/completions`, {
        model: "m",
        prompt: `shared under the ACL ${"x".repeat(200)}`,
        max_tokens: 2,
      });
      const chosen = res.headers.get("x-radixgate-worker")!;
      await res.text();
      await waitFor(() => b.context.index.size(chosen) > 0, 10_000, "B applies A's decision");
      // Idle long enough for the reader's reset check (XINFO) and a few load rounds.
      await new Promise((resolve) => setTimeout(resolve, 1500));
      expect(await redis.client.call("ACL", "LOG")).toEqual([]);
      expect(a.context.sharedState?.link.up).toBe(true);
    }, 20_000);
  },
);
