import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningRouter } from "../../src/server.js";
import { type FailingWorkers, startFailingWorkers } from "../helpers/failing-workers.js";
import { startTestRouter, waitFor } from "../helpers/router.js";

const WORKERS = 12;

/**
 * A large fleet of failing workers (a worker file of 9,999 entries nothing healthy answers) cost
 * the router four requests per worker every few seconds and up to four idle sockets per worker:
 * thousands of descriptors, and the event loop busy with control traffic. A worker that takes no
 * traffic is only health-checked, on a connection closed after each check.
 */
describe("workers that fail their health checks", () => {
  let workers: FailingWorkers;
  let router: RunningRouter;

  beforeAll(async () => {
    // Each answers every request 503 on a kept-alive connection (the router decides whether to keep it).
    workers = await startFailingWorkers(WORKERS, "503 Service Unavailable");
    router = await startTestRouter({
      workerUrls: workers.urls,
      healthCheckIntervalSecs: 60,
      healthCheckTimeoutSecs: 5,
      healthFailureThreshold: 1,
      enginePollIntervalSecs: 60,
    });
  }, 30_000);
  afterAll(async () => {
    await router?.stop(100);
    await workers?.close();
  });

  it("are not read for engine signals, and keep no connection open between checks", async () => {
    const { health, introspection, registry } = router.context;
    await health.checkAll();
    await introspection.pollAll();
    expect(registry.list().every((w) => !w.healthy)).toBe(true);
    // Their first check, then one more each: nothing but /health.
    expect(workers.paths.filter((p) => p === "/health")).toHaveLength(2 * WORKERS);
    expect(workers.paths.filter((p) => p !== "/health")).toEqual([]);
    await waitFor(
      () => workers.open.size === 0,
      5000,
      () => `${workers.open.size} connections still open`,
    );
  }, 30_000);
});
