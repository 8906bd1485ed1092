import { afterAll, beforeAll } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import type { Config } from "../../src/config.js";
import type { RunningRouter } from "../../src/server.js";
import { startTestRouter } from "./router.js";

export interface SimBehindRouter {
  /** The one simulated worker ("w", answering at once). */
  readonly sim: SimWorker;
  /** A test router (startTestRouter) with the sim as its only worker. */
  readonly router: RunningRouter;
}

/**
 * Call in a describe block: one instant simulated worker behind one test router, started before
 * the block's tests and stopped after them. Read `sim` and `router` inside tests (they exist only
 * once beforeAll has run).
 */
export function simBehindRouter(overrides: Partial<Config> = {}): SimBehindRouter {
  let sim: SimWorker | undefined;
  let router: RunningRouter | undefined;
  beforeAll(async () => {
    sim = await startSimWorker({ id: "w", timeScale: 0 });
    router = await startTestRouter({ workerUrls: [sim.url], ...overrides });
  });
  afterAll(async () => {
    await router?.stop(100);
    await sim?.close();
  });
  return {
    get sim() {
      if (sim === undefined) throw new Error("simBehindRouter: read sim inside a test");
      return sim;
    },
    get router() {
      if (router === undefined) throw new Error("simBehindRouter: read router inside a test");
      return router;
    },
  };
}
