import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import type { RunningRouter } from "../../src/server.js";
import { captureLogs } from "../helpers/log-capture.js";
import { redisSkipReason } from "../helpers/redis.js";
import { replicaFleet } from "../helpers/replica-fleet.js";
import { postChat, waitFor } from "../helpers/router.js";

// The fleet's index snapshot in a real redis-server: a replica that starts loads it, then reads
// only the ops after it; an old or foreign snapshot is refused.
describe.skipIf(redisSkipReason !== undefined)(
  `index snapshot in Redis${redisSkipReason ? ` (skipped: ${redisSkipReason})` : ""}`,
  () => {
    const fleet = replicaFleet(3, { stateLoadIntervalMs: 50, stateSnapshotIntervalMs: 100 });
    const { replica } = fleet;
    const freshPrefix = () => `t${randomBytes(4).toString("hex")}`;
    const system = (topic: string) =>
      `You are the ${topic} assistant. ${"Answer carefully and cite the manual. ".repeat(30)}`;
    const route = async (router: RunningRouter, topic: string, question = "q") => {
      const res = await postChat(router, system(topic), question);
      await res.text();
      return res;
    };
    const header = async (prefix: string) => {
      const value = await fleet.redis.client.getBuffer(`${prefix}:snapshot`);
      if (value === null) return undefined;
      return JSON.parse(value.subarray(0, value.indexOf(0x0a)).toString()) as {
        paths: number;
        stream: string;
      };
    };
    const applied = async (router: RunningRouter) => {
      const text = await (await fetch(`${router.url}/metrics`)).text();
      return Number(/^radixgate_state_ops_applied_total (\d+)$/m.exec(text)?.[1] ?? 0);
    };

    /** Routes `topics` through `a`, then waits for a snapshot holding them all: topic → worker. */
    const routedIntoSnapshot = async (a: RunningRouter, prefix: string, topics: string[]) => {
      const chosen = new Map<string, string>();
      for (const topic of topics)
        chosen.set(topic, (await route(a, topic)).headers.get("x-radixgate-worker")!);
      await waitFor(
        async () => ((await header(prefix))?.paths ?? 0) >= topics.length,
        10_000,
        "a snapshot holding every prefix",
      );
      return chosen;
    };

    it("a replica started after the ops stream was trimmed knows every prefix from the snapshot, and applies only the ops after it", async () => {
      const prefix = freshPrefix();
      const a = await replica(prefix);
      const chosen = await routedIntoSnapshot(a, prefix, [
        "billing",
        "shipping",
        "returns",
        "legal",
        "hr",
        "sales",
        "support",
        "it",
      ]);
      // Stop the refresh, so the snapshot's position stays where the test reads it.
      await a.context.sharedState!.snapshot.stop();
      const { stream } = (await header(prefix))!;
      // The stream trimmed to the entries after the snapshot, as a long run would leave it.
      await fleet.redis.client.xtrim(`${prefix}:ops`, "MINID", stream);
      await fleet.redis.client.xdel(`${prefix}:ops`, stream);
      const late = (await route(a, "late topic")).headers.get("x-radixgate-worker")!;
      await waitFor(
        async () => (await fleet.redis.client.xlen(`${prefix}:ops`)) >= 1,
        10_000,
        "the late decision in the stream",
      );
      const after = (await fleet.redis.client.xrange(`${prefix}:ops`, `(${stream}`, "+")).length;
      const b = await replica(prefix);
      for (const [topic, worker] of chosen) {
        const res = await route(b, topic, "from the new replica");
        expect(res.headers.get("x-radixgate-worker")).toBe(worker);
        expect(res.headers.get("x-radixgate-route")).toMatch(/^cache_hit/);
      }
      expect((await route(b, "late topic", "again")).headers.get("x-radixgate-worker")).toBe(late);
      expect(await applied(b)).toBe(after);
    });

    it("keeps a snapshot's entries for a worker that registers after the load, and applies them when it does", async () => {
      const prefix = freshPrefix();
      const a = await replica(prefix);
      const chosen = await routedIntoSnapshot(a, prefix, [
        "billing",
        "shipping",
        "returns",
        "legal",
        "hr",
        "sales",
      ]);
      await a.context.sharedState!.snapshot.stop();
      // Only the snapshot carries the decisions (the stream holds none of them), and the shared
      // worker set is not there yet: the new replica knows only the worker it was given.
      await fleet.redis.client.del(`${prefix}:ops`, `${prefix}:workers`);
      const [first, ...later] = fleet.workers;
      const logs = captureLogs();
      const b = await replica(prefix, { workerUrls: [first!.url] }, logs.logger);
      const loaded = logs.entries.find(
        (l) => l.msg === "shared state: index snapshot loaded; replaying the ops after it",
      );
      expect(loaded?.held_for_later).toBeGreaterThan(0);
      // Discovery lists the others after the load (a pod that became ready later).
      const firstId = b.context.registry.list()[0]!.id;
      for (const w of later) await b.context.membership.add({ url: w.url }, "discovery");
      await waitFor(
        async () =>
          logs.entries.filter((l) => String(l.msg).includes("registered after the load")).length >=
          new Set([...chosen.values()].filter((id) => id !== firstId)).size,
        10_000,
        "the held entries applied",
      );
      for (const [topic, worker] of chosen) {
        const res = await route(b, topic, "from the new replica");
        expect(res.headers.get("x-radixgate-worker")).toBe(worker);
        expect(res.headers.get("x-radixgate-route")).toMatch(/^cache_hit/);
      }
    });

    it("refuses a snapshot signed with another secret, and one put back after its maximum age, and starts from the ops", async () => {
      const prefix = freshPrefix();
      const a = await replica(prefix, { stateMaxOpAgeMs: 1000 });
      await route(a, "billing");
      await waitFor(async () => ((await header(prefix))?.paths ?? 0) >= 1, 10_000, "a snapshot");
      await a.context.sharedState!.snapshot.stop();
      const old = (await fleet.redis.client.getBuffer(`${prefix}:snapshot`))!;
      // Replayed: the same signed value, written back once older than --state-max-op-age-ms.
      await new Promise((resolve) => setTimeout(resolve, 1100));
      await fleet.redis.client.set(`${prefix}:snapshot`, old);
      const replayed = captureLogs();
      await replica(prefix, { stateMaxOpAgeMs: 1000, stateSnapshotIntervalMs: 0 }, replayed.logger);
      expect(
        replayed.entries.find((l) => String(l.msg).startsWith("shared state: index snapshot"))
          ?.reason,
      ).toMatch(/maximum age/);
      const foreign = captureLogs();
      await fleet.redis.client.set(`${prefix}:snapshot`, old);
      await replica(
        prefix,
        { stateSecret: "another fleet's secret entirely", stateSnapshotIntervalMs: 0 },
        foreign.logger,
      );
      expect(
        foreign.entries.find((l) => String(l.msg).startsWith("shared state: index snapshot"))
          ?.reason,
      ).toMatch(/signature/);
    });
  },
);
