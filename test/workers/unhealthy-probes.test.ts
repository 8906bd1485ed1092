import { createServer, type Server, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningRouter } from "../../src/server.js";
import { startTestRouter, waitFor } from "../helpers/router.js";

const WORKERS = 12;

/**
 * A large fleet of failing workers (a worker file of 9,999 entries nothing healthy answers) cost
 * the router four requests per worker every few seconds and up to four idle sockets per worker:
 * thousands of descriptors, and the event loop busy with control traffic. A worker that takes no
 * traffic is only health-checked, on a connection closed after each check.
 */
describe("workers that fail their health checks", () => {
  const servers: Server[] = [];
  const open = new Set<Socket>();
  /** Request lines received, by path. */
  const paths: string[] = [];
  let router: RunningRouter;

  beforeAll(async () => {
    const urls: string[] = [];
    for (let i = 0; i < WORKERS; i++) {
      // Answers every request 503 on a kept-alive connection (the router decides whether to keep it).
      const server = createServer((socket) => {
        open.add(socket);
        socket.on("error", () => {});
        socket.on("close", () => open.delete(socket));
        socket.on("data", (data) => {
          for (const line of data.toString("latin1").split("\r\n")) {
            const m = /^(GET|POST) (\S+) HTTP/.exec(line);
            if (m === null) continue;
            paths.push(m[2] as string);
            socket.write("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n");
          }
        });
      });
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
      servers.push(server);
      urls.push(`http://127.0.0.1:${(server.address() as { port: number }).port}`);
    }
    router = await startTestRouter({
      workerUrls: urls,
      healthCheckIntervalSecs: 60,
      healthCheckTimeoutSecs: 5,
      healthFailureThreshold: 1,
      enginePollIntervalSecs: 60,
    });
  }, 30_000);
  afterAll(async () => {
    await router?.stop(100);
    for (const s of open) s.destroy();
    await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
  });

  it("are not read for engine signals, and keep no connection open between checks", async () => {
    const { health, introspection, registry } = router.context;
    await health.checkAll();
    await introspection.pollAll();
    expect(registry.list().every((w) => !w.healthy)).toBe(true);
    // Their first check, then one more each: nothing but /health.
    expect(paths.filter((p) => p === "/health")).toHaveLength(2 * WORKERS);
    expect(paths.filter((p) => p !== "/health")).toEqual([]);
    await waitFor(
      () => open.size === 0,
      5000,
      () => `${open.size} connections still open`,
    );
  }, 30_000);
});
