import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import type { RunningRouter } from "../../src/server.js";
import { redisSkipReason } from "../helpers/redis.js";
import { replicaFleet } from "../helpers/replica-fleet.js";
import { postChat, waitFor } from "../helpers/router.js";

// A dead worker's entries purged everywhere after --dead-worker-grace-secs: the index of the
// replica that saw it die, its peers' (through the ops), the Redis snapshot, the cache account.
describe.skipIf(redisSkipReason !== undefined)(
  `dead worker purge${redisSkipReason ? ` (skipped: ${redisSkipReason})` : ""}`,
  () => {
    const fleet = replicaFleet(2, { stateLoadIntervalMs: 50 });
    const system = (topic: string) =>
      `You are the ${topic} assistant. ${"Answer carefully and cite the manual. ".repeat(30)}`;

    it("a worker back within the grace keeps its entries; one dead past it is purged on every replica, in the snapshot and the cache account", async () => {
      const prefix = `t${randomBytes(4).toString("hex")}`;
      const a = await fleet.replica(prefix, {
        healthCheckIntervalSecs: 0.05,
        healthFailureThreshold: 1,
        healthSuccessThreshold: 1,
        deadWorkerGraceSecs: 1.5,
        stateSnapshotIntervalMs: 100,
      });
      const b = await fleet.replica(prefix);
      const res = await postChat(a, system("billing"), "q");
      await res.text();
      const id = res.headers.get("x-radixgate-worker")!;
      const worker = a.context.registry.get(id)!;
      const sim = fleet.workers.find((w) => worker.url.startsWith(w.url.replace(/\/$/, "")))!;
      await waitFor(() => b.context.index.size(id) > 0, 10_000, "B applies A's decision");
      const held = a.context.index.size(id);
      const unhealthy = (router: RunningRouter, want: boolean) =>
        waitFor(() => router.context.registry.get(id)!.healthy === !want, 10_000, "health");
      try {
        // Back within the grace: nothing lost.
        sim.setFaults({ unhealthy: true });
        await unhealthy(a, true);
        sim.setFaults({ unhealthy: false });
        await unhealthy(a, false);
        expect(a.context.index.size(id)).toBe(held);
        expect(b.context.index.size(id)).toBeGreaterThan(0);
        // Dead past it: purged here, on B, in the next snapshot and in the cache account.
        sim.setFaults({ unhealthy: true });
        await unhealthy(a, true);
        await waitFor(() => a.context.index.size(id) === 0, 10_000, "A purges it");
        const purgedAt = Date.now();
        await waitFor(() => b.context.index.size(id) === 0, 10_000, "B purges it");
        expect(a.context.cacheLedger.window.snapshot(Date.now()).workers.has(id)).toBe(false);
        await waitFor(
          async () => {
            const value = await fleet.redis.client.getBuffer(`${prefix}:snapshot`);
            if (value === null) return false;
            const header = JSON.parse(value.subarray(0, value.indexOf(0x0a)).toString());
            return header.at > purgedAt && !value.includes(id);
          },
          10_000,
          "a snapshot without it",
        );
      } finally {
        sim.setFaults({ unhealthy: false });
      }
    });
  },
);
