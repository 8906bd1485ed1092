import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import type { ConfigOverrides } from "../../src/config.js";
import type { RunningRouter } from "../../src/server.js";
import type { RedisNewPrefixLeader } from "../../src/state/new-prefix-leader.js";
import { StateSecret } from "../../src/state/state-secret.js";
import { redisSkipReason, TEST_STATE_SECRET } from "../helpers/redis.js";
import { replicaFleet } from "../helpers/replica-fleet.js";
import { postChat, routedChat, waitFor } from "../helpers/router.js";

// --state-new-prefix leader: the replica of rank 0 decides the new prefixes of every replica.
describe.skipIf(redisSkipReason !== undefined)(
  `the replicas' leader of new prefixes${redisSkipReason ? ` (skipped: ${redisSkipReason})` : ""}`,
  () => {
    const fleet = replicaFleet(3, {
      stateLoadIntervalMs: 50,
      stateNewPrefix: "leader",
      // Wide: on a loaded machine a short wait could run out and hide the leader's answer.
      stateClaimTimeoutMs: 5000,
    });
    const { replica } = fleet;
    const freshPrefix = () => `l${randomBytes(4).toString("hex")}`;
    const tenant = (name: string) =>
      `You are the assistant of tenant ${name}. ${"Follow the tenant's policies to the letter. ".repeat(40)}`;
    const leaderOf = (r: RunningRouter) =>
      r.context.sharedState!.leader as unknown as RedisNewPrefixLeader;
    const metric = (r: RunningRouter, name: string) =>
      r.context.metrics.registry.getSingleMetricAsString(name);

    /**
     * A (started first: rank 0, the leader) and B (rank 1), B deaf to A's decisions (its ops
     * reader stopped), so that what B knows of A's placements comes only from A's answers.
     */
    const pair = async (overrides: ConfigOverrides = {}) => {
      const prefix = freshPrefix();
      const a = await replica(prefix, overrides);
      const b = await replica(prefix, overrides);
      await b.context.sharedState!.reader.stop();
      await waitFor(
        () => leaderOf(a).role() === "leader" && leaderOf(b).role() === "follower",
        10_000,
        "ranks known: A leads, B follows",
      );
      return { a, b };
    };

    it("a follower's new prefix goes where the leader placed it, though the follower never heard of it", async () => {
      const { a, b } = await pair();
      const system = tenant("acme");
      const first = await routedChat(postChat(a, system, "How do I reset my password?"));
      // B's own index holds nothing of this tenant: only the leader's answer can name A's worker.
      for (const question of ["Where is my invoice?", "Can I change my plan?"]) {
        const next = await routedChat(postChat(b, system, question));
        expect(next.worker).toBe(first.worker);
        await waitFor(
          () => b.context.registry.list().every((w) => w.ownInFlight === 0),
          10_000,
          "B's request over",
        );
      }
      expect(await metric(b, "radixgate_state_leader_asks_total")).toMatch(/outcome="answered"} 1/);
      expect(await metric(a, "radixgate_state_leader_asks_total")).toMatch(/outcome="granted"} 1/);
      // Asked, not claimed: no claim key was written.
      expect(
        await fleet.redis.client.keys(`${a.context.sharedState!.options.keyPrefix}:claim:*`),
      ).toEqual([]);
    });

    it("when the leader does not answer, the follower's own choice stands after the timeout", async () => {
      const { a, b } = await pair({ stateClaimTimeoutMs: 300 });
      // A still ranks first (its load key lives) but hears no ask: as a leader that hangs.
      await leaderOf(a).stop();
      const started = Date.now();
      const r = await routedChat(postChat(b, tenant("globex"), "First question?"));
      expect(r.worker).toMatch(/.+/);
      expect(Date.now() - started).toBeGreaterThanOrEqual(250);
      expect(await metric(b, "radixgate_state_leader_asks_total")).toMatch(/outcome="timeout"} 1/);
      // Paused after a timeout: the next new prefix is claimed at once, not asked.
      await routedChat(postChat(b, tenant("initech"), "Second question?"));
      expect(await metric(b, "radixgate_state_leader_asks_total")).toMatch(/outcome="skipped"} 1/);
    });

    it("an unsigned, badly signed or stale ask is refused and counted, and answered by nothing", async () => {
      const { a } = await pair();
      const channel = `${a.context.sharedState!.options.keyPrefix}:leader:ask`;
      const ask = {
        n: 1,
        r: "intruder",
        t: Date.now(),
        q: 1,
        k: "k",
        e: 256,
        l: 512,
        i: a.context.registry.list().map((w) => w.id),
        h: a.context.registry.list().map(() => 0),
        a: 0,
        w: "",
        d: "",
      };
      const body = JSON.stringify(ask);
      const redis = fleet.redis.client;
      const secret = new StateSecret(TEST_STATE_SECRET);
      const other = new StateSecret("another fleet's secret, not ours");
      await redis.publish(channel, body);
      await redis.publish(channel, `${other.sign(channel, [body])} ${body}`);
      const old = JSON.stringify({ ...ask, t: Date.now() - 60_000 });
      await redis.publish(channel, `${secret.sign(channel, [old])} ${old}`);
      await waitFor(
        async () => /reason="stale"} 1/.test(await metric(a, "radixgate_state_ops_rejected_total")),
        10_000,
        "the three asks refused",
      );
      const rejected = await metric(a, "radixgate_state_ops_rejected_total");
      expect(rejected).toMatch(/reason="unsigned"} 1/);
      expect(rejected).toMatch(/reason="bad_signature"} 1/);
      expect(await metric(a, "radixgate_state_leader_asks_total")).not.toMatch(/outcome="granted"/);
      // A signed ask describing a text longer than any body is refused, not padded to its length.
      const huge = JSON.stringify({ ...ask, t: Date.now(), l: 2 ** 40 });
      await redis.publish(channel, `${secret.sign(channel, [huge])} ${huge}`);
      await waitFor(
        async () =>
          /reason="unreadable"} 1/.test(await metric(a, "radixgate_state_ops_rejected_total")),
        10_000,
        "the oversize ask refused",
      );
      // A well-signed one is granted (the same ask, signed with the fleet's secret).
      const fresh = JSON.stringify({ ...ask, t: Date.now() });
      await redis.publish(channel, `${secret.sign(channel, [fresh])} ${fresh}`);
      await waitFor(
        async () =>
          /outcome="granted"} 1/.test(await metric(a, "radixgate_state_leader_asks_total")),
        10_000,
        "the signed ask granted",
      );
    });
  },
);
