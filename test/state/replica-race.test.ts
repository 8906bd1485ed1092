import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import type { ConfigOverrides } from "../../src/config.js";
import type { RunningRouter } from "../../src/server.js";
import { redisSkipReason } from "../helpers/redis.js";
import { replicaFleet } from "../helpers/replica-fleet.js";
import { postChat, waitFor } from "../helpers/router.js";

// Issue 20 item 10: two replicas routing one new prefix before either sees the other's decision.
describe.skipIf(redisSkipReason !== undefined)(
  `replicas racing on a new prefix${redisSkipReason ? ` (skipped: ${redisSkipReason})` : ""}`,
  () => {
    const fleet = replicaFleet(3, {
      stateLoadIntervalMs: 50,
      // Wide: on a loaded machine the default 50 ms could run out and hide the agreement.
      stateClaimTimeoutMs: 5000,
    });
    const { replica } = fleet;
    const freshPrefix = () => `r${randomBytes(4).toString("hex")}`;
    const tenant = (name: string) =>
      `You are the assistant of tenant ${name}. ${"Follow the tenant's policies to the letter. ".repeat(40)}`;
    const chat = (router: RunningRouter, system: string, question: string) =>
      postChat(router, system, question);
    const routed = async (res: Promise<Response>) => {
      const r = await res;
      expect(r.status).toBe(200);
      await r.text();
      return {
        worker: r.headers.get("x-radixgate-worker")!,
        route: r.headers.get("x-radixgate-route")!,
      };
    };

    /**
     * Waits until A has read B's load after B's warm-up ended, so both choose on equal loads.
     * Checking A's counts alone was not enough (the flake under load): A may not have read B's
     * key yet when the check passes, then read B's "1" published during the warm-up, and route on
     * it. So: B's published count is 0, then a whole exchange of A (its SET, then its read, in one
     * round: rounds never overlap) starts after that, then A's counts are 0.
     */
    const equalLoads = async (prefix: string, a: RunningRouter, b: RunningRouter) => {
      const redis = fleet.redis.client;
      const loadKey = (r: RunningRouter) => `${prefix}:load:${r.context.sharedState!.replicaId}`;
      await waitFor(
        () => b.context.registry.list().every((w) => w.ownInFlight === 0),
        10_000,
        "B's warm-up over",
      );
      await waitFor(
        async () => noCounts(await redis.get(loadKey(b))),
        10_000,
        "B's count of 0 published",
      );
      // A's key comes back only from a round that started after this DEL, so after B's 0.
      await redis.del(loadKey(a));
      await waitFor(async () => (await redis.exists(loadKey(a))) === 1, 10_000, "A's next round");
      await waitFor(
        () => [a, b].every((r) => r.context.registry.list().every((w) => w.inFlight === 0)),
        10_000,
        "every in-flight count back to 0",
      );
    };

    /**
     * Two replicas on one Redis, B deaf to A's decisions (its ops reader stopped): the race's window,
     * held open. B's load rotation is one step ahead of A's (one warm-up request of its own), so
     * on their own they would send one new prefix to two different workers.
     */
    const racingPair = async (overrides: ConfigOverrides = {}) => {
      const prefix = freshPrefix();
      const a = await replica(prefix, overrides);
      const b = await replica(prefix, overrides);
      await b.context.sharedState!.reader.stop();
      await routed(chat(b, "warm-up", "hello"));
      await equalLoads(prefix, a, b);
      return { a, b };
    };

    it("the second replica follows the first's claim on a new prefix it has not heard of", async () => {
      const { a, b } = await racingPair();
      const system = tenant("acme");
      const first = await routed(chat(a, system, "How do I reset my password?"));
      const second = await routed(chat(b, system, "Where is my invoice?"));
      expect(second.worker).toBe(first.worker);
      expect(second.route).toMatch(/^peer_claim/);
      const metrics = await b.context.metrics.registry.getSingleMetricAsString(
        "radixgate_state_claims_total",
      );
      expect(metrics).toMatch(/outcome="followed"} 1/);
      // Each replica timed its claim's round trip; A timed B's warm-up decision reaching it.
      const count = async (r: RunningRouter, name: string) => {
        const text = await r.context.metrics.registry.getSingleMetricAsString(name);
        return Number(/_count (\d+)/.exec(text)?.[1] ?? 0);
      };
      expect(await count(a, "radixgate_state_claim_seconds")).toBe(1);
      expect(await count(b, "radixgate_state_claim_seconds")).toBe(1);
      await waitFor(
        async () => (await count(a, "radixgate_state_op_delay_seconds")) >= 1,
        10_000,
        "B's decision applied by A",
      );
      // B's reader is stopped: it applies nothing of A's.
      expect(await count(b, "radixgate_state_op_delay_seconds")).toBe(0);
    });

    it("both replicas sent the same new prefix at the same moment agree on one worker", async () => {
      const { a, b } = await racingPair();
      const system = tenant("globex");
      const [x, y] = await Promise.all([
        routed(chat(a, system, "First question?")),
        routed(chat(b, system, "Second question?")),
      ]);
      expect(y.worker).toBe(x.worker);
    });

    it("with --state-claim-timeout-ms 0 there are no claims, and the two replicas split the prefix", async () => {
      const { a, b } = await racingPair({ stateClaimTimeoutMs: 0 });
      const system = tenant("initech");
      const first = await routed(chat(a, system, "One?"));
      const second = await routed(chat(b, system, "Two?"));
      expect(second.worker).not.toBe(first.worker);
      expect(
        await fleet.redis.client.keys(`${a.context.sharedState?.options.keyPrefix}:claim:*`),
      ).toEqual([]);
    });

    it("a request whose prefix a worker already holds asks Redis nothing", async () => {
      const { a } = await racingPair();
      const system = tenant("umbrella");
      await routed(chat(a, system, "One?"));
      const before = await a.context.metrics.registry.getSingleMetricAsString(
        "radixgate_state_claims_total",
      );
      const again = await routed(chat(a, system, "Two?"));
      expect(again.route).toMatch(/^cache_hit/);
      expect(
        await a.context.metrics.registry.getSingleMetricAsString("radixgate_state_claims_total"),
      ).toBe(before);
    });
  },
);

/** A load value that counts no request in flight (its worker ids; "~" keys carry queued prefill). */
function noCounts(value: string | null): boolean {
  if (value === null) return false;
  const counts = JSON.parse(value.slice(value.indexOf(" ") + 1)) as Record<string, unknown>;
  return Object.keys(counts).every((key) => key.startsWith("~"));
}
