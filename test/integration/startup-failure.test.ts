import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import type { StartOptions } from "../../src/server.js";
import type { SiblingLink } from "../../src/state/cluster-channel.js";
import type { SiblingMessage } from "../../src/state/cluster-messages.js";
import {
  redisSkipReason,
  startRedis,
  TEST_STATE_SECRET,
  type TestRedis,
} from "../helpers/redis.js";
import { startTestRouter, waitFor } from "../helpers/router.js";

/** A radixgate-cluster channel whose primary answers at once (no siblings). */
function loneSiblingLink(): SiblingLink & { listeners: number } {
  const listeners: ((raw: unknown) => void)[] = [];
  const link = {
    group: "abcd1234",
    listeners: 0,
    transport: {
      connected: true,
      send(message: SiblingMessage) {
        if (message.t === "hello")
          queueMicrotask(() => {
            for (const l of listeners) l({ rg: "sib", t: "ready" });
          });
        return true;
      },
      onMessage(listener: (raw: unknown) => void) {
        listeners.push(listener);
        link.listeners = listeners.length;
      },
      onClose() {},
    },
  };
  return link;
}

/** Servers, sockets and timers this process holds now, by kind (worker threads are not listed). */
function handles(): Map<string, number> {
  const counts = new Map<string, number>();
  for (const r of process.getActiveResourcesInfo()) counts.set(r, (counts.get(r) ?? 0) + 1);
  return counts;
}

/** Whether no kind of handle is held more often now than in `baseline`; else what is left over. */
function leftOver(baseline: Map<string, number>): string | undefined {
  const extra: string[] = [];
  for (const [kind, n] of handles()) {
    const before = baseline.get(kind) ?? 0;
    if (n > before) extra.push(`${kind} x${n - before}`);
  }
  return extra.length === 0 ? undefined : extra.join(", ");
}

/** Connections the router opened to Redis (the test's own client is unnamed). */
async function routerConnections(redis: TestRedis): Promise<string[]> {
  const list = (await redis.client.client("LIST")) as string;
  return list
    .split("\n")
    .map((line) => /name=(\S*)/.exec(line)?.[1] ?? "")
    .filter((name) => name !== "");
}

describe.skipIf(redisSkipReason !== undefined)(
  `a start-up failure at each step leaves no service running${redisSkipReason ? ` (skipped: ${redisSkipReason})` : ""}`,
  () => {
    let redis: TestRedis;
    let worker: SimWorker;
    let dir: string;
    beforeAll(async () => {
      redis = await startRedis();
      worker = await startSimWorker({ id: "w", timeScale: 0 });
      dir = await mkdtemp(join(tmpdir(), "radixgate-startup-"));
      await writeFile(join(dir, "quota.yaml"), "tenants:\n  t:\n    tokens_per_minute: 1000\n");
      await writeFile(join(dir, "workers.yaml"), `- ${worker.url}\n`);
    });
    afterAll(async () => {
      await worker?.close();
      await redis?.stop();
    });

    /** Every service on: shared state, quotas in Redis, parse workers, metrics port, a worker file, siblings, timers. */
    const start = (options: Omit<StartOptions, "logger">) =>
      startTestRouter(
        {
          workerUrls: [worker.url],
          stateUrl: redis.url,
          stateSecret: TEST_STATE_SECRET,
          stateKeyPrefix: "startup",
          tenantQuota: join(dir, "quota.yaml"),
          parseWorkers: 1,
          prometheusPort: 0,
          workerFile: join(dir, "workers.yaml"),
          healthCheckIntervalSecs: 1,
          enginePollIntervalSecs: 1,
          evictionIntervalSecs: 1,
        },
        undefined,
        { siblings: loneSiblingLink(), ...options },
      );

    it("each step, failing, stops what started before it", async () => {
      const baseline = handles();
      const steps: string[] = [];
      const router = await start({ beforeServiceStart: (name) => steps.push(name) });
      await router.stop(100);
      expect(steps).toEqual([
        "tracing",
        "registry",
        "parse-pool",
        "command-line-workers",
        "first-probes",
        "shared-state",
        "admission",
        "siblings",
        "http",
        "metrics-http",
        "discovery",
        "health",
        "fleet-capacity",
        "introspection",
        "eviction",
      ]);
      await waitFor(
        async () => (await routerConnections(redis)).length === 0,
        5000,
        "no Redis connection left after stop",
      );
      for (const failing of steps) {
        await expect(
          start({
            beforeServiceStart: (name) => {
              if (name === failing) throw new Error(`injected failure at ${name}`);
            },
          }),
          failing,
        ).rejects.toThrow(`injected failure at ${failing}`);
        await waitFor(
          async () => (await routerConnections(redis)).length === 0,
          5000,
          () => `no Redis connection left after a failure at ${failing}`,
        );
        await waitFor(
          () => leftOver(baseline) === undefined,
          5000,
          () =>
            `no server, socket or timer left after a failure at ${failing}: ${leftOver(baseline)}`,
        );
      }
    }, 180_000);

    it("a --prometheus-port already taken fails the start and stops admission and the shared state too", async () => {
      const first = await startTestRouter({ prometheusPort: 0 });
      try {
        const baseline = handles();
        await expect(
          startTestRouter({
            workerUrls: [worker.url],
            stateUrl: redis.url,
            stateSecret: TEST_STATE_SECRET,
            stateKeyPrefix: "startup",
            tenantQuota: join(dir, "quota.yaml"),
            prometheusPort: first.metricsPort as number,
          }),
        ).rejects.toThrow(/--prometheus-port/);
        await waitFor(
          async () => (await routerConnections(redis)).length === 0,
          5000,
          "no Redis connection left",
        );
        await waitFor(
          () => leftOver(baseline) === undefined,
          5000,
          () => `nothing left: ${leftOver(baseline)}`,
        );
      } finally {
        await first.stop(10);
      }
    }, 60_000);
  },
);
