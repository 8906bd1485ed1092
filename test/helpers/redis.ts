import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { createServer } from "node:net";
import { Redis } from "ioredis";

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

function findRedisServer(): string | undefined {
  try {
    return (
      execFileSync("sh", ["-c", "command -v redis-server"], { encoding: "utf8" }).trim() ||
      undefined
    );
  } catch {
    return undefined;
  }
}

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
  let child: ChildProcess | undefined = await spawnRedis(binary, port);
  const client = new Redis({ host: "127.0.0.1", port, lazyConnect: true, maxRetriesPerRequest: 1 });
  client.on("error", () => {});
  await client.connect();
  const kill = async () => {
    const c = child;
    child = undefined;
    if (c === undefined || c.exitCode !== null) return;
    await new Promise<void>((resolve) => {
      c.once("exit", () => resolve());
      c.kill("SIGKILL");
    });
  };
  return {
    port,
    url: `redis://127.0.0.1:${port}/0`,
    client,
    kill,
    async restart() {
      await kill();
      child = await spawnRedis(binary, port);
    },
    async stop() {
      client.disconnect();
      await kill();
    },
  };
}

async function spawnRedis(binary: string, port: number): Promise<ChildProcess> {
  const child = spawn(
    binary,
    ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  let output = "";
  child.stdout?.on("data", (d: Buffer) => {
    output += d.toString();
  });
  child.stderr?.on("data", (d: Buffer) => {
    output += d.toString();
  });
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`redis-server exited: ${output.slice(-500)}`);
    if (await pings(port)) return child;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  child.kill("SIGKILL");
  throw new Error(`redis-server did not answer on port ${port}: ${output.slice(-500)}`);
}

async function pings(port: number): Promise<boolean> {
  const probe = new Redis({
    host: "127.0.0.1",
    port,
    lazyConnect: true,
    retryStrategy: () => null,
    maxRetriesPerRequest: 0,
  });
  probe.on("error", () => {});
  try {
    await probe.connect();
    return (await probe.ping()) === "PONG";
  } catch {
    return false;
  } finally {
    probe.disconnect();
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}
