import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { freePort } from "../../sim/free-port.js";
import { startSimWorker } from "../../sim/worker.js";
import type { RunningRouter } from "../../src/server.js";
import { encodeOp, type StateOp } from "../../src/state/state-op.js";
import { StateSecret } from "../../src/state/state-secret.js";
import { normalizeWorkerUrl, workerIdFor } from "../../src/workers/worker-url.js";
import { captureLogs } from "../helpers/log-capture.js";
import { redisSkipReason, TEST_STATE_SECRET } from "../helpers/redis.js";
import { replicaFleet } from "../helpers/replica-fleet.js";
import { postChat, postJson, waitFor } from "../helpers/router.js";

// Issue 20 items 2 and 3: the Redis ops stream is a trust boundary. Two replicas on a real
// redis-server; "the attacker" is a plain Redis client with write access and no secret.
describe.skipIf(redisSkipReason !== undefined)(
  `Redis write access without the state secret${redisSkipReason ? ` (skipped: ${redisSkipReason})` : ""}`,
  () => {
    const fleet = replicaFleet(2, { stateLoadIntervalMs: 50 });
    const { replica } = fleet;
    const freshPrefix = () => `t${randomBytes(4).toString("hex")}`;
    /** An op as a replica holding the secret would write it. */
    const signedXadd = (prefix: string, op: StateOp, secret = TEST_STATE_SECRET) =>
      fleet.redis.client.xadd(
        `${prefix}:ops`,
        "*",
        ...encodeOp("peer", op, { secret: new StateSecret(secret), scope: `${prefix}:ops` }),
      );
    const rejected = async (router: RunningRouter, reason: string) => {
      const text = await (await fetch(`${router.url}/metrics`)).text();
      const line = new RegExp(
        `^radixgate_state_ops_rejected_total\\{reason="${reason}"\\} (\\d+)$`,
        "m",
      );
      return Number(line.exec(text)?.[1] ?? 0);
    };
    const chat = (router: RunningRouter, system: string) => postChat(router, system, "hi");

    it("an unsigned or wrongly signed add or remove on the ops stream changes no replica's workers, and is counted", async () => {
      const prefix = freshPrefix();
      const a = await replica(prefix);
      const b = await replica(prefix);
      const evil = await startSimWorker({ id: "evil", timeScale: 0 });
      try {
        const ops = `${prefix}:ops`;
        await fleet.redis.client.xadd(ops, "*", "r", "evil", "k", "a", "u", evil.url);
        await fleet.redis.client.xadd(ops, "*", "r", "evil", "k", "d", "u", fleet.workers[0]!.url);
        await signedXadd(prefix, { kind: "add", url: evil.url }, "not the fleet's secret at all");
        // A signed op after them: once it is applied, the ones before it were read too.
        const marker = await startSimWorker({ id: "marker", timeScale: 0 });
        try {
          await signedXadd(prefix, { kind: "add", url: marker.url });
          await waitFor(
            () =>
              a.context.registry.get(marker.url) !== undefined &&
              b.context.registry.get(marker.url) !== undefined,
            10_000,
            "the signed add applied on both",
          );
        } finally {
          await marker.close();
        }
        for (const router of [a, b]) {
          expect(router.context.registry.get(evil.url)).toBeUndefined();
          expect(router.context.registry.get(fleet.workers[0]!.url)).toBeDefined();
          expect(await rejected(router, "unsigned")).toBe(2);
          expect(await rejected(router, "bad_signature")).toBe(1);
        }
        expect(evil.stats().requests).toBe(0);
      } finally {
        await evil.close();
      }
    });

    it("a starting replica refuses workers written to the shared workers hash without the secret", async () => {
      const prefix = freshPrefix();
      const evil = await startSimWorker({ id: "evil-hash", timeScale: 0 });
      try {
        await fleet.redis.client.hset(
          `${prefix}:workers`,
          evil.url,
          JSON.stringify({ added_at: Date.now() }),
        );
        const a = await replica(prefix, { workerUrls: [] });
        expect(a.context.registry.get(evil.url)).toBeUndefined();
        expect(await rejected(a, "unsigned")).toBe(1);
      } finally {
        await evil.close();
      }
    });

    it("a workers hash filled with junk is read only up to a bound, and the replica still publishes its own set", async () => {
      const prefix = freshPrefix();
      const junk = fleet.redis.client.pipeline();
      for (let i = 0; i < 6000; i++) junk.hset(`${prefix}:workers`, `http://junk-${i}:1`, "{}");
      await junk.exec();
      const a = await replica(prefix);
      expect(a.context.registry.size).toBe(fleet.workers.length);
      expect(await rejected(a, "oversize")).toBe(1);
      expect(await rejected(a, "unsigned")).toBeLessThanOrEqual(4096 + 256);
      await waitFor(
        async () =>
          (await fleet.redis.client.hexists(`${prefix}:workers`, fleet.workers[0]!.url)) === 1,
        10_000,
        "its own workers written to the hash",
      );
    });

    it("a peer's worker is vetted like an admin-API add: not link-local, not this router, not a second spelling", async () => {
      const prefix = freshPrefix();
      const b = await replica(prefix);
      const [w1] = fleet.workers;
      const respelled = w1!.url.replace("127.0.0.1", "[::ffff:127.0.0.1]");
      await signedXadd(prefix, { kind: "add", url: "http://169.254.169.254" });
      await signedXadd(prefix, { kind: "add", url: b.url });
      await signedXadd(prefix, { kind: "add", url: respelled });
      await signedXadd(prefix, { kind: "add", url: w1!.url.replace("127.0.0.1", "localhost") });
      const marker = await startSimWorker({ id: "marker2", timeScale: 0 });
      try {
        await signedXadd(prefix, { kind: "add", url: marker.url });
        await waitFor(() => b.context.registry.get(marker.url) !== undefined, 10_000, "marker");
        expect(b.context.registry.list().map((w) => w.url)).toEqual([
          ...fleet.workers.map((w) => w.url),
          marker.url,
        ]);
      } finally {
        await marker.close();
      }
    });

    it("decisions that follow a peer's add on the stream (one batch) find the worker added", async () => {
      const prefix = freshPrefix();
      const extra = await startSimWorker({ id: "extra", timeScale: 0 });
      try {
        const id = workerIdFor(normalizeWorkerUrl(extra.url));
        await signedXadd(prefix, { kind: "add", url: extra.url });
        await signedXadd(prefix, {
          kind: "insert",
          worker: id,
          text: "a decision for the new worker",
        });
        // B replays both in one read at its start.
        const b = await replica(prefix);
        expect(b.context.registry.get(extra.url)).toBeDefined();
        expect(b.context.index.size(id)).toBeGreaterThan(0);
      } finally {
        await extra.close();
      }
    });

    it("a dead worker added on one replica takes no traffic on the other until that replica's own health check passes", async () => {
      const prefix = freshPrefix();
      const a = await replica(prefix);
      const b = await replica(prefix);
      const dead = `http://127.0.0.1:${await freePort()}`;
      const added = await postJson(`${a.url}/workers`, { url: dead });
      expect(added.status).toBe(202);
      await waitFor(() => b.context.registry.get(dead) !== undefined, 10_000, "B adds it");
      const onB = b.context.registry.get(dead)!;
      // Held back from the moment it is registered, and still out once B's probe has failed.
      expect(onB.healthy).toBe(false);
      await waitFor(() => onB.healthFailures === 1, 10_000, "B's own probe fails");
      expect(onB.healthy).toBe(false);
      for (let i = 0; i < 10; i++) {
        const res = await chat(b, `question ${i} ${"x".repeat(i * 7)}`);
        expect(res.status).toBe(200);
        expect(res.headers.get("x-radixgate-worker")).not.toBe(onB.id);
        await res.text();
      }
    });

    it("an insert longer than this replica's --state-max-text-chars is dropped, not applied", async () => {
      const prefix = freshPrefix();
      const b = await replica(prefix, { stateMaxTextChars: 1000 });
      const id = b.context.registry.list()[0]!.id;
      await signedXadd(prefix, { kind: "insert", worker: id, text: "z".repeat(50_000) });
      await signedXadd(prefix, { kind: "insert", worker: id, text: "small text" });
      await waitFor(() => b.context.index.size(id) > 0, 10_000, "the small insert applied");
      expect(b.context.index.size(id)).toBeLessThan(1000);
      expect(await rejected(b, "oversize")).toBe(1);
    });

    it("a worker's own API key reaches the other replica sealed, never in clear in Redis, and the other replica uses it", async () => {
      const prefix = freshPrefix();
      const key = `sk-${randomBytes(12).toString("hex")}`;
      const locked = await startSimWorker({ id: "locked", timeScale: 0, apiKey: key });
      try {
        const logs = captureLogs("debug");
        const a = await replica(prefix, { workerUrls: [] }, logs.logger);
        const b = await replica(prefix, { workerUrls: [] }, logs.logger);
        const added = await postJson(`${a.url}/workers`, { url: locked.url, api_key: key });
        expect(added.status).toBe(202);
        await waitFor(() => b.context.registry.get(locked.url)?.healthy === true, 10_000, "B");
        for (const router of [a, b, a, b]) {
          const res = await chat(router, "through either replica");
          expect(res.status).toBe(200);
          await res.text();
        }
        expect(locked.stats().unauthorized).toBe(0);
        // A replica started later gets the key from the workers hash.
        const c = await replica(prefix, { workerUrls: [] });
        await waitFor(() => c.context.registry.get(locked.url)?.healthy === true, 10_000, "C");
        const res = await chat(c, "through the late replica");
        expect(res.status).toBe(200);
        await res.text();
        const stored = JSON.stringify([
          await fleet.redis.client.xrange(`${prefix}:ops`, "-", "+"),
          await fleet.redis.client.hgetall(`${prefix}:workers`),
        ]);
        expect(stored).toContain(locked.url);
        expect(stored).not.toContain(key);
        // Nor in the logs, nor the state secret.
        expect(logs.lines.length).toBeGreaterThan(0);
        expect(logs.lines.join("\n")).not.toContain(key);
        expect(logs.lines.join("\n")).not.toContain(TEST_STATE_SECRET);
      } finally {
        await locked.close();
      }
    });
  },
);
