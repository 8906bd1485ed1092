import { afterAll, beforeAll } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import type { ConfigOverrides } from "../../src/config.js";
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
export function simBehindRouter(overrides: ConfigOverrides = {}): SimBehindRouter {
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

export interface SimsBehindRouter {
  /** The instant simulated workers, ids `<idPrefix>1`..`<idPrefix><count>`. */
  readonly workers: readonly SimWorker[];
  /** A cache_aware test router (startTestRouter) in front of all of them. */
  readonly router: RunningRouter;
}

/**
 * Call in a describe block: `count` instant simulated workers behind one cache_aware test router
 * (`overrides` on top), started before the block's tests and stopped after them. Read `workers`
 * and `router` inside tests.
 */
export function simsBehindRouter(
  count: number,
  idPrefix: string,
  overrides: ConfigOverrides = {},
): SimsBehindRouter {
  let workers: SimWorker[] | undefined;
  let router: RunningRouter | undefined;
  beforeAll(async () => {
    workers = await Promise.all(
      Array.from({ length: count }, (_, i) =>
        startSimWorker({ id: `${idPrefix}${i + 1}`, timeScale: 0 }),
      ),
    );
    router = await startTestRouter({
      policy: "cache_aware",
      workerUrls: workers.map((w) => w.url),
      ...overrides,
    });
  });
  afterAll(async () => {
    await router?.stop(100);
    await Promise.all((workers ?? []).map((w) => w.close()));
  });
  return {
    get workers() {
      if (workers === undefined) throw new Error("simsBehindRouter: read workers inside a test");
      return workers;
    },
    get router() {
      if (router === undefined) throw new Error("simsBehindRouter: read router inside a test");
      return router;
    },
  };
}
