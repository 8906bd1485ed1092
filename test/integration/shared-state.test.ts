import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { startSimWorker } from "../../sim/worker.js";
import type { RunningRouter } from "../../src/server.js";
import { StateSecret } from "../../src/state/state-secret.js";
import { redisSkipReason, startRedis, TEST_STATE_SECRET } from "../helpers/redis.js";
import { replicaFleet } from "../helpers/replica-fleet.js";
import { postChat, postJson, startTestRouter, waitFor } from "../helpers/router.js";

// Replicas sharing routing state through a real redis-server (issue 11).
describe.skipIf(redisSkipReason !== undefined)(
  `shared state through Redis${redisSkipReason ? ` (skipped: ${redisSkipReason})` : ""}`,
  () => {
    /** Replicas on the test's Redis, each under its own key prefix so tests do not see each other. */
    const fleet = replicaFleet(3, { stateLoadIntervalMs: 50 });
    const { replica } = fleet;
    const freshPrefix = () => `t${randomBytes(4).toString("hex")}`;
    const prompt = (topic: string) =>
      `You are the ${topic} assistant. ${"Answer carefully and cite the manual. ".repeat(30)}`;
    const chat = (router: RunningRouter, system: string, question = "What now?") =>
      postChat(router, system, question);

    it("a decision taken on one replica reaches the other replica's index, which then routes the same prefix to the same worker", async () => {
      const prefix = freshPrefix();
      const a = await replica(prefix);
      const b = await replica(prefix);
      const system = prompt("billing");
      const first = await chat(a, system);
      expect(first.status).toBe(200);
      const chosen = first.headers.get("x-radixgate-worker")!;
      await first.text();
      await waitFor(
        () => b.context.index.size(chosen) > 0,
        10_000,
        "replica B applies A's decision",
      );
      // B never saw this prompt itself, yet finds it on the worker A sent it to.
      const second = await chat(b, system, "And then?");
      expect(second.status).toBe(200);
      expect(second.headers.get("x-radixgate-worker")).toBe(chosen);
      expect(second.headers.get("x-radixgate-route")).toMatch(/^cache_hit/);
      await second.text();
    });

    it("without --state-url the second replica does not know where the prefix went", async () => {
      const a = await startTestRouter({
        policy: "cache_aware",
        workerUrls: fleet.workers.map((w) => w.url),
      });
      const b = await startTestRouter({
        policy: "cache_aware",
        workerUrls: fleet.workers.map((w) => w.url),
      });
      fleet.track(a, b);
      const res = await chat(a, prompt("shipping"));
      const chosen = res.headers.get("x-radixgate-worker")!;
      await res.text();
      expect(b.context.index.size(chosen)).toBe(0);
    });

    it("a replica started later replays the recent decisions before it serves", async () => {
      const prefix = freshPrefix();
      const a = await replica(prefix);
      const system = prompt("returns");
      const res = await chat(a, system);
      const chosen = res.headers.get("x-radixgate-worker")!;
      await res.text();
      await waitFor(
        async () => Number((await fleet.redis.client.xlen(`${prefix}:ops`)) ?? 0) > 0,
        10_000,
        "the decision reaches the stream",
      );
      const late = await replica(prefix);
      // No waiting: start() replayed the stream before the router listened.
      expect(late.context.index.size(chosen)).toBeGreaterThan(0);
      const again = await chat(late, system, "Another question");
      expect(again.headers.get("x-radixgate-worker")).toBe(chosen);
      await again.text();
    });

    it("killing Redis mid-run fails no request, and Redis coming back resynchronises the replicas", async () => {
      const prefix = freshPrefix();
      const a = await replica(prefix);
      const b = await replica(prefix);
      const statuses: number[] = [];
      let sending = true;
      const traffic = (async () => {
        let i = 0;
        while (sending) {
          const router = i % 2 === 0 ? a : b;
          const res = await chat(router, prompt(`topic${i % 5}`), `question ${i}`);
          statuses.push(res.status);
          await res.text();
          i += 1;
        }
      })();
      await waitFor(() => statuses.length >= 10, 10_000, "traffic before the outage");
      await fleet.redis.kill();
      const atKill = statuses.length;
      await waitFor(() => statuses.length >= atKill + 20, 10_000, "traffic during the outage");
      await waitFor(() => a.context.sharedState?.link.up === false, 10_000, "A sees Redis down");
      await fleet.redis.restart();
      await waitFor(
        () => a.context.sharedState?.link.up === true && b.context.sharedState?.link.up === true,
        15_000,
        "both replicas reconnect",
      );
      await waitFor(() => statuses.length >= atKill + 40, 10_000, "traffic after the outage");
      sending = false;
      await traffic;
      expect(statuses.every((s) => s === 200)).toBe(true);
      // Regression: both replicas rewrote the lost workers hash at once, and one read it half
      // written and dropped live workers. The hash only ever adds workers now.
      expect(a.context.registry.size).toBe(fleet.workers.length);
      expect(b.context.registry.size).toBe(fleet.workers.length);

      // Resynchronised: a new decision on A reaches B again.
      const system = prompt("after the outage");
      // B's sizes before A decides: B may apply A's decision before A's answer is even read.
      const before = new Map(
        b.context.registry.list().map((w) => [w.id, b.context.index.size(w.id)]),
      );
      const res = await chat(a, system);
      const chosen = res.headers.get("x-radixgate-worker")!;
      await res.text();
      await waitFor(
        () => b.context.index.size(chosen) > before.get(chosen)!,
        15_000,
        "B applies A's decisions after Redis returned",
      );
      const onB = await chat(b, system, "and?");
      expect(onB.headers.get("x-radixgate-worker")).toBe(chosen);
      await onB.text();
    }, 60_000);

    it("a worker added through one replica's admin API appears on the other; removing it on the other removes it everywhere", async () => {
      const prefix = freshPrefix();
      const extra = await startSimWorker({ id: "extra", timeScale: 0 });
      try {
        const a = await replica(prefix);
        const b = await replica(prefix);
        const added = await postJson(`${a.url}/workers`, { url: extra.url });
        expect(added.status).toBe(202);
        await waitFor(() => b.context.registry.get(extra.url) !== undefined, 10_000, "B adds it");
        // A third replica started now, with no --worker-urls at all, loads the current set.
        const c = await replica(prefix, { workerUrls: [] });
        expect(
          c.context.registry
            .list()
            .map((w) => w.url)
            .sort(),
        ).toEqual([...fleet.workers.map((w) => w.url), extra.url].sort());
        const removed = await fetch(`${b.url}/workers/${encodeURIComponent(extra.url)}`, {
          method: "DELETE",
        });
        expect(removed.status).toBe(202);
        await waitFor(
          () =>
            a.context.registry.get(extra.url) === undefined &&
            c.context.registry.get(extra.url) === undefined,
          10_000,
          "A and C remove it",
        );
        expect(await fleet.redis.client.hexists(`${prefix}:workers`, extra.url)).toBe(0);
      } finally {
        await extra.close();
      }
    });

    it("each replica sees the others' in-flight requests in its load, and they drop out when they finish", async () => {
      const prefix = freshPrefix();
      const slow = await startSimWorker({ id: "slow", timeScale: 0 });
      const quick = await startSimWorker({ id: "quick", timeScale: 0 });
      slow.setFaults({ hang: true });
      const controllers: AbortController[] = [];
      try {
        const urls = [slow.url, quick.url];
        // A alternates: every other request hangs on the slow worker.
        const a = await replica(prefix, { workerUrls: urls, policy: "round_robin" });
        const b = await replica(prefix, { workerUrls: urls, policy: "least_load" });
        const pending = [1, 2, 3, 4, 5, 6].map(() => {
          const controller = new AbortController();
          controllers.push(controller);
          return fetch(`${a.url}/v1/completions`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ model: "m", prompt: "wait", max_tokens: 2 }),
            signal: controller.signal,
          })
            .then((res) => res.text())
            .catch(() => undefined);
        });
        const onA = a.context.registry.get(slow.url)!;
        const onB = b.context.registry.get(slow.url)!;
        await waitFor(() => onA.ownInFlight === 3, 10_000, "A has 3 in flight");
        await waitFor(() => onB.peerInFlight === 3, 10_000, "B sees A's 3");
        expect(onB.ownInFlight).toBe(0);
        expect(onB.inFlight).toBe(3);
        // B's least_load now avoids the worker that is busy with A's requests.
        slow.setFaults({ hang: false });
        const res = await postJson(`${b.url}/v1/completions`, {
          model: "m",
          prompt: "hi",
          max_tokens: 2,
        });
        expect(res.headers.get("x-radixgate-worker")).toBe(b.context.registry.get(quick.url)!.id);
        await res.text();
        for (const c of controllers) c.abort();
        await Promise.all(pending);
        await waitFor(() => onB.peerInFlight === 0, 10_000, "A's requests drop out of B's load");
      } finally {
        for (const c of controllers) c.abort();
        await Promise.allSettled([slow.close(), quick.close()]);
      }
    });

    it("a Redis that stops answering (CLIENT PAUSE) delays no request: they all finish while it is paused", async () => {
      const prefix = freshPrefix();
      const a = await replica(prefix);
      const b = await replica(prefix);
      // Redis holds every client's commands (its own UNPAUSE too) for 4 s.
      const pausedAt = Date.now();
      await fleet.redis.client.call("CLIENT", "PAUSE", "4000", "ALL");
      const finished: number[] = [];
      for (let i = 0; i < 6; i++) {
        const res = await chat(i % 2 === 0 ? a : b, prompt(`slow redis ${i}`));
        expect(res.status).toBe(200);
        await res.text();
        finished.push(Date.now());
      }
      expect(Math.max(...finished)).toBeLessThan(pausedAt + 4000);
    }, 30_000);

    it("a replica started while Redis is down connects when it comes up and publishes its workers", async () => {
      const late = await startRedis();
      try {
        await late.kill();
        const prefix = freshPrefix();
        const router = await startTestRouter({
          policy: "cache_aware",
          workerUrls: fleet.workers.map((w) => w.url),
          stateUrl: late.url,
          stateSecret: TEST_STATE_SECRET,
          stateKeyPrefix: prefix,
        });
        fleet.track(router);
        expect(router.context.sharedState?.link.up).toBe(false);
        await late.restart();
        await waitFor(() => router.context.sharedState?.link.up === true, 15_000, "connects");
        await waitFor(
          async () => (await late.client.hlen(`${prefix}:workers`)) === fleet.workers.length,
          15_000,
          "its workers reach the shared set",
        );
      } finally {
        await late.stop();
      }
    }, 40_000);

    it("entries it cannot read in the stream (another writer, another version) are skipped", async () => {
      const prefix = freshPrefix();
      await fleet.redis.client.xadd(`${prefix}:ops`, "*", "junk", "1");
      await fleet.redis.client.xadd(
        `${prefix}:ops`,
        "*",
        "r",
        "x",
        "k",
        "i",
        "w",
        "no-such-worker",
        "x",
        "t",
      );
      const a = await replica(prefix);
      const b = await replica(prefix);
      const res = await chat(a, prompt("after junk"));
      const chosen = res.headers.get("x-radixgate-worker")!;
      await res.text();
      await waitFor(
        () => b.context.index.size(chosen) > 0,
        10_000,
        "B still applies A's decisions",
      );
    });

    it("garbage or an unsigned count in a peer's load key is ignored, not added", async () => {
      const prefix = freshPrefix();
      const a = await replica(prefix);
      const id = a.context.registry.list()[0]!.id;
      await fleet.redis.client.set(`${prefix}:load:bad1`, "not json", "PX", 60_000);
      await fleet.redis.client.set(
        `${prefix}:load:bad2`,
        JSON.stringify({ [id]: -5 }),
        "PX",
        60_000,
      );
      // Counts are signed like ops (issue 20): a forged count in clear is ignored.
      await fleet.redis.client.set(
        `${prefix}:load:forged`,
        JSON.stringify({ [id]: 50 }),
        "PX",
        60_000,
      );
      const good = JSON.stringify({ [id]: 2 });
      const signature = new StateSecret(TEST_STATE_SECRET).sign(`${prefix}:load:good`, [good]);
      await fleet.redis.client.set(`${prefix}:load:good`, `${signature} ${good}`, "PX", 60_000);
      await fleet.redis.client.sadd(`${prefix}:replicas`, "bad1", "bad2", "forged", "good");
      const worker = a.context.registry.get(id)!;
      await waitFor(() => worker.peerInFlight === 2, 10_000, "the good peer's count");
      const metrics = await (await fetch(`${a.url}/metrics`)).text();
      expect(metrics).toMatch(/^radixgate_state_ops_rejected_total\{reason="unsigned"\} [1-9]/m);
      await fleet.redis.client.del(`${prefix}:load:good`);
      await waitFor(() => worker.peerInFlight === 0, 10_000, "an expired peer drops out");
      expect(await fleet.redis.client.sismember(`${prefix}:replicas`, "good")).toBe(0);
    });

    it("a replica whose Redis is down at start still starts and serves", async () => {
      const dead = await startRedis();
      const url = dead.url;
      await dead.stop();
      const started = Date.now();
      const router = await startTestRouter({
        policy: "cache_aware",
        workerUrls: fleet.workers.map((w) => w.url),
        stateUrl: url,
        stateSecret: TEST_STATE_SECRET,
        stateKeyPrefix: freshPrefix(),
        stateQueueSize: 3,
      });
      fleet.track(router);
      expect(Date.now() - started).toBeLessThan(8000);
      const res = await chat(router, prompt("offline"));
      expect(res.status).toBe(200);
      await res.text();
      expect(router.context.sharedState?.link.up).toBe(false);
      // Its publish queue is bounded: past --state-queue-size the oldest decisions are dropped.
      for (let i = 0; i < 6; i++) await (await chat(router, prompt(`offline ${i}`))).text();
      const metrics = await (await fetch(`${router.url}/metrics`)).text();
      expect(metrics).toMatch(/^radixgate_state_connected 0$/m);
      expect(metrics).toMatch(/^radixgate_state_ops_dropped_total 4$/m);
    });
  },
);
