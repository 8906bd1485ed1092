import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "../../src/logger.js";
import { HealthChecker } from "../../src/workers/health.js";
import { WorkerRegistry } from "../../src/workers/registry.js";
import { Worker, type WorkerOptions } from "../../src/workers/worker.js";

// A full collection on demand, to weigh what stays alive (the flag is put back after the file).
setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;
afterAll(() => setFlagsFromString("--no-expose-gc"));

const OPTIONS: WorkerOptions = {
  breaker: { failureThreshold: 5, openMs: 1000, successThreshold: 1 },
  connectTimeoutMs: 1000,
};

/**
 * A worker file of thousands of addresses that answer at once with an error (as every address does
 * behind an egress proxy): each worker is probed and fails. What each one holds after its failed
 * checks is what 10,000 of them hold, so it is weighed here.
 */
describe("workers that fail their health checks", () => {
  let server: Server;
  let up = false;
  let url = "";
  let connections = 0;

  beforeAll(async () => {
    server = createServer((req, res) => {
      req.resume();
      res.statusCode = up ? 200 : 404;
      res.end();
    });
    server.on("connection", () => {
      connections += 1;
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  const checker = () =>
    new HealthChecker(
      new WorkerRegistry(OPTIONS),
      { intervalMs: 60_000, timeoutMs: 2000, failureThreshold: 1, successThreshold: 1 },
      createLogger({ level: "silent" }),
    );

  it("hold no connection pool: about 6 KB of heap each, not 28", async () => {
    up = false;
    const health = checker();
    const count = 600;
    gc();
    const before = process.memoryUsage().heapUsed;
    const workers = Array.from({ length: count }, (_, i) => new Worker(`w${i}`, url, OPTIONS));
    for (let from = 0; from < count; from += 100) {
      const slice = workers.slice(from, from + 100);
      expect(await Promise.all(slice.map((w) => health.probeFirst(w)))).not.toContain(true);
    }
    // The one-shot clients' sockets close on their own; their handles go a turn later.
    await new Promise((resolve) => setTimeout(resolve, 50));
    gc();
    const perWorker = (process.memoryUsage().heapUsed - before) / count;
    expect(workers.every((w) => w.healthFailures >= 1)).toBe(true);
    // With an undici Pool each (18 KB of heap before any connection) they weighed about 28 KB.
    expect(perWorker).toBeLessThan(12 * 1024);
  });

  it("get a pool once one answers, and it keeps its connection between checks", async () => {
    up = false;
    const health = checker();
    const worker = new Worker("w", url, OPTIONS);
    expect(await health.probeFirst(worker)).toBe(false);
    up = true;
    expect(await health.probeFirst(worker)).toBe(true);
    const before = connections;
    for (let i = 0; i < 6; i++) await health.check(worker);
    // A worker in traffic keeps its connections: its checks share the pool's sockets.
    expect(connections - before).toBeLessThanOrEqual(2);
    expect(worker.healthy).toBe(true);
    await worker.closePool();
  });
});
