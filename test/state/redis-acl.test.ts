import { beforeAll, describe, expect, it } from "vitest";
import { redisSkipReason } from "../helpers/redis.js";
import { replicaFleet } from "../helpers/replica-fleet.js";
import { postJson, waitFor } from "../helpers/router.js";

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
  "+strlen",
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
    const fleet = replicaFleet(2);

    beforeAll(async () => {
      await fleet.redis.client.call(
        "ACL",
        "SETUSER",
        "radixgate",
        ...ROUTER_ACL,
        ">router-password",
      );
      await fleet.redis.client.call("ACL", "LOG", "RESET");
    });

    it("is enough for two replicas to share decisions and workers, and nothing it denies is tried", async () => {
      const replica = () =>
        fleet.replica("fleet1", {
          workerUrls: [fleet.workers[0]!.url],
          stateUrl: `redis://radixgate:router-password@127.0.0.1:${fleet.redis.port}/0`,
          stateLoadIntervalMs: 50,
        });
      const a = await replica();
      const b = await replica();
      const added = await postJson(`${a.url}/workers`, { url: fleet.workers[1]!.url });
      expect(added.status).toBe(202);
      await waitFor(
        () => b.context.registry.get(fleet.workers[1]!.url) !== undefined,
        10_000,
        "add",
      );
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
      expect(await fleet.redis.client.call("ACL", "LOG")).toEqual([]);
      expect(a.context.sharedState?.link.up).toBe(true);
    }, 20_000);
  },
);
