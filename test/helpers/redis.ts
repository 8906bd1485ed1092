import type { ChildProcess } from "node:child_process";
import { Redis } from "ioredis";
import { freePort } from "../../sim/free-port.js";
import { findRedisServer, spawnRedisServer } from "../../sim/redis-server.js";
import { killChild } from "./kill-child.js";

/**
 * A real redis-server for the shared-state tests, on a free 127.0.0.1 port, without persistence.
 *
 * Outside CI, tests skip when redis-server is not installed (`redisSkipReason` says why); under CI
 * (CI=true) they run and fail, so a CI machine without Redis cannot pass by skipping them.
 */
export const REDIS_BINARY = findRedisServer();

export const redisSkipReason: string | undefined =
  REDIS_BINARY === undefined && process.env.CI !== "true"
    ? "redis-server is not installed (Debian/Ubuntu: apt-get install -y redis-server); the shared-state tests need a real one"
    : undefined;

/** The --state-secret the tests' replicas share. */
export const TEST_STATE_SECRET = "the test fleet's shared state secret";

export interface TestRedis {
  readonly port: number;
  readonly url: string;
  /** A client for assertions (closed by stop). */
  readonly client: Redis;
  /** Kills the server (SIGKILL: no goodbye to the clients). */
  kill(): Promise<void>;
  /** Starts it again on the same port, empty (as after a crash without persistence). */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

export async function startRedis(): Promise<TestRedis> {
  if (REDIS_BINARY === undefined) {
    throw new Error(
      "redis-server is not installed: apt-get install -y redis-server (.ci/run installs it under CI)",
    );
  }
  const binary = REDIS_BINARY;
  const port = await freePort();
  let child: ChildProcess | undefined = await spawnRedisServer(binary, port);
  const client = new Redis({ host: "127.0.0.1", port, lazyConnect: true, maxRetriesPerRequest: 1 });
  client.on("error", () => {});
  await client.connect();
  const kill = async () => {
    const c = child;
    child = undefined;
    await killChild(c);
  };
  return {
    port,
    url: `redis://127.0.0.1:${port}/0`,
    client,
    kill,
    async restart() {
      await kill();
      child = await spawnRedisServer(binary, port);
    },
    async stop() {
      client.disconnect();
      await kill();
    },
  };
}
