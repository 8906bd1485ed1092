import { mkdtemp, rename, rm, writeFile } from "node:fs/promises";
import { createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningRouter } from "../../src/server.js";
import { MAX_PROBES_IN_FLIGHT } from "../../src/workers/probe-slots.js";
import { startTestRouter, waitFor } from "../helpers/router.js";

const WORKERS = 600;

describe("--worker-file: a large file of slow workers", () => {
  let dir: string;
  let file: string;
  let router: RunningRouter;
  const servers: Server[] = [];
  const open = new Set<Socket>();
  /** Requests received, and received but not yet answered (their peak). */
  let accepted = 0;
  let pending = 0;
  let peak = 0;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "radixgate-large-file-"));
    file = join(dir, "workers.yaml");
    // Workers that answer each request after a second, then close the connection: requests
    // received and not yet answered = health checks and engine reads in flight. They pass their
    // health checks (an unhealthy worker's engine is not read) and fail every engine read.
    const ports: number[] = [];
    for (let i = 0; i < WORKERS; i++) {
      const server = createServer((s) => track(s));
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
      servers.push(server);
      ports.push((server.address() as { port: number }).port);
    }
    await writeFile(file, "[]\n");
    router = await startTestRouter({
      workerFile: file,
      healthCheckIntervalSecs: 60,
      healthCheckTimeoutSecs: 20,
      enginePollIntervalSecs: 60,
      enginePollTimeoutSecs: 20,
      discoveryGraceSecs: 0,
    });
    const entries = ports.map((port) => `- http://127.0.0.1:${port}\n`);
    await writeFile(`${file}.tmp`, entries.join(""));
    await rename(`${file}.tmp`, file);
  }, 60_000);
  afterAll(async () => {
    await router?.stop(100);
    for (const s of open) s.destroy();
    await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
    await rm(dir, { recursive: true, force: true });
  });

  function track(socket: Socket): void {
    open.add(socket);
    socket.on("error", () => {});
    socket.on("close", () => open.delete(socket));
    socket.once("data", (data) => {
      accepted++;
      pending++;
      peak = Math.max(peak, pending);
      const status = data.toString("latin1").startsWith("GET /health ")
        ? "200 OK"
        : "503 Service Unavailable";
      setTimeout(() => {
        pending--;
        socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
      }, 1000);
    });
  }

  it("health checks and engine reads in flight stay bounded while all of them join", async () => {
    // Every worker gets its first health check and an engine read: 600 of each at once before.
    await waitFor(
      () => accepted >= WORKERS * 2,
      60_000,
      () => `${accepted} requests`,
    );
    expect(peak).toBeLessThanOrEqual(2 * MAX_PROBES_IN_FLIGHT);
    // The router answers meanwhile.
    expect((await fetch(`${router.url}/health`)).status).toBeLessThan(600);
  }, 90_000);
});
