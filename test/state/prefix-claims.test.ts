import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "../../src/logger.js";
import { type ClaimOutcome, RedisPrefixClaims } from "../../src/state/prefix-claims.js";
import { RedisLink } from "../../src/state/redis-link.js";
import { stateKeys } from "../../src/state/state-keys.js";
import { redisSkipReason, startRedis, type TestRedis } from "../helpers/redis.js";

// New-prefix claims against a real redis-server: the first replica's proposal stands.
describe.skipIf(redisSkipReason !== undefined)(
  `new-prefix claims in Redis${redisSkipReason ? ` (skipped: ${redisSkipReason})` : ""}`,
  () => {
    let redis: TestRedis;
    const links: RedisLink[] = [];

    beforeAll(async () => {
      redis = await startRedis();
    });

    afterAll(async () => {
      await Promise.allSettled(links.map((l) => l.close()));
      await redis?.stop();
    });

    /** One replica's claims on its own link; `outcomes` records how each claim ended. */
    const replica = async (
      prefix: string,
      options: { ttlMs?: number; timeoutMs?: number } = {},
    ) => {
      // As the Redis transport builds it: the claims connection knows the claim timeout.
      const link = new RedisLink(
        { url: redis.url, claimTimeoutMs: options.timeoutMs ?? 1000 },
        createLogger({ level: "silent" }),
      );
      links.push(link);
      await link.connect();
      const outcomes: ClaimOutcome[] = [];
      const claims = new RedisPrefixClaims(link, {
        keys: stateKeys(prefix),
        ttlMs: options.ttlMs ?? 2000,
        timeoutMs: options.timeoutMs ?? 1000,
        onOutcome: (o) => outcomes.push(o),
      });
      return { link, claims, outcomes };
    };
    const freshPrefix = () => `c${randomBytes(4).toString("hex")}`;

    it("the second replica to claim a prefix is told the first one's worker", async () => {
      const prefix = freshPrefix();
      const a = await replica(prefix);
      const b = await replica(prefix);
      expect(await a.claims.claim("p1", "worker-a")).toBe("worker-a");
      expect(await b.claims.claim("p1", "worker-b")).toBe("worker-a");
      expect(a.outcomes).toEqual(["won"]);
      expect(b.outcomes).toEqual(["followed"]);
      // Another prefix is claimed afresh.
      expect(await b.claims.claim("p2", "worker-b")).toBe("worker-b");
    });

    it("two replicas claiming at the same moment agree on one worker", async () => {
      const prefix = freshPrefix();
      const a = await replica(prefix);
      const b = await replica(prefix);
      const [x, y] = await Promise.all([
        a.claims.claim("race", "worker-a"),
        b.claims.claim("race", "worker-b"),
      ]);
      expect(x).toBe(y);
      expect([...a.outcomes, ...b.outcomes].sort()).toEqual(["followed", "won"]);
    });

    it("a claim lives in Redis under the key prefix for its TTL only", async () => {
      const prefix = freshPrefix();
      const a = await replica(prefix, { ttlMs: 5000 });
      await a.claims.claim("ttl", "worker-a");
      const ttl = await redis.client.pttl(`${prefix}:claim:ttl`);
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(5000);
    });

    it("requests of one replica claiming the same prefix together share one round trip", async () => {
      const prefix = freshPrefix();
      const a = await replica(prefix);
      const first = a.claims.claim("burst", "worker-1");
      const second = a.claims.claim("burst", "worker-2");
      expect(second).toBe(first);
      expect(await second).toBe("worker-1");
      expect(a.outcomes).toEqual(["won"]);
    });

    it("nothing is asked while the link is down: the caller gets no promise to wait for", async () => {
      const link = new RedisLink({ url: redis.url }, createLogger({ level: "silent" }));
      links.push(link);
      const claims = new RedisPrefixClaims(link, {
        keys: stateKeys(freshPrefix()),
        ttlMs: 2000,
        timeoutMs: 50,
      });
      expect(claims.claim("never", "worker-a")).toBeUndefined();
    });

    it("a Redis that does not answer costs one claim its timeout, and none is tried for a while after", async () => {
      const prefix = freshPrefix();
      const a = await replica(prefix, { timeoutMs: 50 });
      await redis.client.call("CLIENT", "PAUSE", "400", "ALL");
      try {
        expect(await a.claims.claim("stalled", "worker-a")).toBeUndefined();
        expect(a.claims.claim("next", "worker-a")).toBeUndefined();
        expect(a.outcomes).toEqual(["timeout", "skipped"]);
      } finally {
        await redis.client.call("CLIENT", "UNPAUSE").catch(() => {});
      }
    });
  },
);
