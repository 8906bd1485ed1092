import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { startSimWorker } from "../../sim/worker.js";
import type { RunningRouter } from "../../src/server.js";
import { encodeOp } from "../../src/state/state-op.js";
import { StateSecret } from "../../src/state/state-secret.js";
import { captureLogs } from "../helpers/log-capture.js";
import { redisSkipReason, TEST_STATE_SECRET } from "../helpers/redis.js";
import { replicaFleet } from "../helpers/replica-fleet.js";
import { postJson, waitFor } from "../helpers/router.js";

// Signed entries written again by someone with write access to Redis (no secret needed: they
// replay what a replica signed). Real redis-server, replicas in this process.
describe.skipIf(redisSkipReason !== undefined)(
  `replayed signed state${redisSkipReason ? ` (skipped: ${redisSkipReason})` : ""}`,
  () => {
    const fleet = replicaFleet(2, { stateLoadIntervalMs: 50 });
    const { replica } = fleet;
    const freshPrefix = () => `t${randomBytes(4).toString("hex")}`;
    const rejected = async (router: RunningRouter, reason: string) => {
      const text = await (await fetch(`${router.url}/metrics`)).text();
      const line = new RegExp(
        `^radixgate_state_ops_rejected_total\\{reason="${reason}"\\} (\\d+)$`,
        "m",
      );
      return Number(line.exec(text)?.[1] ?? 0);
    };
    const remove = (router: RunningRouter, url: string) =>
      fetch(`${router.url}/workers/${encodeURIComponent(url)}`, { method: "DELETE" });

    it("a captured signed add-worker op written again after the worker's removal re-adds it nowhere, not even on a replica started after", async () => {
      const prefix = freshPrefix();
      const ops = `${prefix}:ops`;
      const a = await replica(prefix);
      const b = await replica(prefix);
      const gone = await startSimWorker({ id: "gone", timeScale: 0 });
      const marker = await startSimWorker({ id: "marker", timeScale: 0 });
      try {
        expect((await postJson(`${a.url}/workers`, { url: gone.url })).status).toBe(202);
        await waitFor(() => b.context.registry.get(gone.url) !== undefined, 10_000, "B adds it");
        // What an eavesdropper on Redis keeps: the signed add, as A wrote it.
        const entries = await fleet.redis.client.xrange(ops, "-", "+");
        const captured = entries
          .map(([, fields]) => fields)
          .find((f) => f.includes("a") && f.includes(gone.url) && f[f.indexOf("k") + 1] === "a");
        expect(captured).toBeDefined();
        expect((await remove(a, gone.url)).status).toBe(202);
        await waitFor(
          () =>
            a.context.registry.get(gone.url) === undefined &&
            b.context.registry.get(gone.url) === undefined,
          10_000,
          "both remove it",
        );
        await fleet.redis.client.xadd(ops, "*", ...(captured as string[]));
        // A fresh signed op after the replay: once it is applied, the replay was read too.
        const secret = { secret: new StateSecret(TEST_STATE_SECRET), scope: ops };
        await fleet.redis.client.xadd(
          ops,
          "*",
          ...encodeOp("peer", { kind: "add", url: marker.url }, secret),
        );
        const c = await replica(prefix, { workerUrls: [] });
        await waitFor(
          () => [a, b, c].every((r) => r.context.registry.get(marker.url) !== undefined),
          10_000,
          "the marker applied on every replica",
        );
        for (const router of [a, b, c]) {
          expect(router.context.registry.get(gone.url)).toBeUndefined();
          expect(await rejected(router, "replayed")).toBeGreaterThanOrEqual(1);
        }
        expect(gone.stats().requests).toBe(0);
      } finally {
        await gone.close();
        await marker.close();
      }
    }, 60_000);

    it("an old workers-hash value put back after the worker's removal does not restore it on a replica started later", async () => {
      const prefix = freshPrefix();
      const maxAge = { stateMaxOpAgeMs: 1500 };
      const a = await replica(prefix, maxAge);
      const gone = await startSimWorker({ id: "gone-hash", timeScale: 0 });
      try {
        expect((await postJson(`${a.url}/workers`, { url: gone.url })).status).toBe(202);
        await waitFor(
          async () => (await fleet.redis.client.hget(`${prefix}:workers`, gone.url)) !== null,
          10_000,
          "its value in the hash",
        );
        const captured = (await fleet.redis.client.hget(`${prefix}:workers`, gone.url)) as string;
        const signedAt = (JSON.parse(captured) as { added_at: number }).added_at;
        expect((await remove(a, gone.url)).status).toBe(202);
        await waitFor(
          async () => (await fleet.redis.client.hget(`${prefix}:workers`, gone.url)) === null,
          10_000,
          "its value removed",
        );
        // Older than the age limit, as any value is some time after its worker left.
        await waitFor(() => Date.now() - signedAt > 2000, 5000, "the value grown old");
        await fleet.redis.client.hset(`${prefix}:workers`, gone.url, captured);
        // The stream's remove is long trimmed under traffic: only the hash tells.
        await fleet.redis.client.del(`${prefix}:ops`);
        const c = await replica(prefix, maxAge);
        expect(c.context.registry.get(gone.url)).toBeUndefined();
        expect(await rejected(c, "stale")).toBeGreaterThanOrEqual(1);
        // The workers a replica keeps are signed again, so they stay in the set.
        const d = await replica(prefix, { ...maxAge, workerUrls: [] });
        expect(
          d.context.registry
            .list()
            .map((w) => w.url)
            .sort(),
        ).toEqual(fleet.workers.map((w) => w.url).sort());
        expect(gone.stats().requests).toBe(0);
      } finally {
        await gone.close();
      }
    }, 60_000);

    it("an ops entry at the largest possible ID does not stop publishing: it is logged, the stream deleted and sharing goes on", async () => {
      const prefix = freshPrefix();
      const logs = captureLogs("warn");
      const a = await replica(prefix, {}, logs.logger);
      const b = await replica(prefix);
      await fleet.redis.client.xadd(
        `${prefix}:ops`,
        "18446744073709551615-18446744073709551615",
        "junk",
        "1",
      );
      const res = await postJson(`${a.url}/v1/completions`, {
        model: "m",
        prompt: `after the largest ID: ${"a long shared preamble. ".repeat(20)}`,
        max_tokens: 2,
      });
      expect(res.status).toBe(200);
      const worker = res.headers.get("x-radixgate-worker") as string;
      await res.text();
      await waitFor(
        () => b.context.index.size(worker) > 0,
        10_000,
        "B applies A's decision published after the stuck entry",
      );
      expect(logs.lines.some((l) => l.includes("takes no new entry"))).toBe(true);
    }, 30_000);
  },
);
