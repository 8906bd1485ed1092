import { afterAll, beforeAll } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import type { ConfigOverrides } from "../../src/config.js";
import type { Logger } from "../../src/logger.js";
import type { RunningRouter } from "../../src/server.js";
import { startRedis, TEST_STATE_SECRET, type TestRedis } from "./redis.js";
import { startTestRouter } from "./router.js";

export interface ReplicaFleet {
  /** The real redis-server the replicas share. */
  readonly redis: TestRedis;
  /** The instant simulated workers w1..wN every replica routes to. */
  readonly workers: readonly SimWorker[];
  /**
   * A replica (cache_aware, every worker, the fleet's Redis and TEST_STATE_SECRET) under its own
   * key prefix so tests do not see each other; the fleet's defaults, then `overrides`, apply.
   */
  replica(prefix: string, overrides?: ConfigOverrides, logger?: Logger): Promise<RunningRouter>;
  /** Routers started otherwise, to stop with the fleet's own. */
  track(...routers: RunningRouter[]): void;
}

/**
 * Call in a describe block: a real redis-server and `workerCount` simulated workers, started
 * before the block's tests; the replicas it started (or was given to track), the workers and the
 * server are stopped after them. Read `redis` and `workers` inside tests (they exist only once
 * beforeAll has run). Hooks the block adds later run after this beforeAll and before this afterAll.
 */
export function replicaFleet(workerCount: number, defaults: ConfigOverrides = {}): ReplicaFleet {
  let redis: TestRedis | undefined;
  let workers: SimWorker[] | undefined;
  const routers: RunningRouter[] = [];
  beforeAll(async () => {
    redis = await startRedis();
    workers = await Promise.all(
      Array.from({ length: workerCount }, (_, i) =>
        startSimWorker({ id: `w${i + 1}`, timeScale: 0 }),
      ),
    );
  });
  afterAll(async () => {
    await Promise.allSettled(routers.map((r) => r.stop(100)));
    await Promise.allSettled((workers ?? []).map((w) => w.close()));
    await redis?.stop();
  });
  const fleet: ReplicaFleet = {
    get redis() {
      if (redis === undefined) throw new Error("replicaFleet: read redis inside a test");
      return redis;
    },
    get workers() {
      if (workers === undefined) throw new Error("replicaFleet: read workers inside a test");
      return workers;
    },
    async replica(prefix, overrides = {}, logger) {
      const router = await startTestRouter(
        {
          policy: "cache_aware",
          workerUrls: fleet.workers.map((w) => w.url),
          stateUrl: fleet.redis.url,
          stateSecret: TEST_STATE_SECRET,
          stateKeyPrefix: prefix,
          ...defaults,
          ...overrides,
        },
        logger,
      );
      routers.push(router);
      return router;
    },
    track(...started) {
      routers.push(...started);
    },
  };
  return fleet;
}
