import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import type { RunningRouter } from "../../src/server.js";
import { MAX_PROBE_STARTS_PER_SEC, ProbeSlots } from "../../src/workers/probe-slots.js";
import { type FailingWorkers, startFailingWorkers } from "../helpers/failing-workers.js";
import { startTestRouter } from "../helpers/router.js";

describe("ProbeSlots: probes in flight and probes started a second are both bounded", () => {
  afterEach(() => vi.useRealTimers());

  it("paces starts of probes that end at once, in order, after a burst of 16", async () => {
    vi.useFakeTimers();
    const slots = new ProbeSlots(256, 100, () => Date.now());
    const started: number[] = [];
    const all = Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        slots.run(async () => {
          started.push(i);
        }),
      ),
    );
    await vi.advanceTimersByTimeAsync(0);
    // Bounding only those in flight started all 60 in this turn.
    expect(started.length).toBe(16);
    expect(slots.queued).toBe(44);
    await vi.advanceTimersByTimeAsync(100);
    expect(started.length).toBeGreaterThanOrEqual(25);
    expect(started.length).toBeLessThanOrEqual(27);
    await vi.advanceTimersByTimeAsync(1000);
    await all;
    expect(started).toEqual(Array.from({ length: 60 }, (_, i) => i));
    expect(slots.inFlight).toBe(0);
  });

  it("a slot freed goes to the oldest waiter, not to a newcomer", async () => {
    const slots = new ProbeSlots(1, 0);
    const order: string[] = [];
    let release!: () => void;
    const first = slots.run(() => new Promise<void>((r) => (release = r)));
    const second = slots.run(async () => void order.push("waiter"));
    release();
    const third = slots.run(async () => void order.push("newcomer"));
    await Promise.all([first, second, third]);
    expect(order).toEqual(["waiter", "newcomer"]);
  });
});

/**
 * Workers that answer their health check at once and fail it (a refusal, a 404): bounding the
 * checks in flight alone let a pass run as fast as they answered. Real sockets; the bound is an
 * upper one, so a slow machine only makes the counts smaller.
 */
describe("health checks of workers that fail at once", () => {
  // One spread batch (probe-slots.ts spreadOver): a pass starts them all at once.
  const WORKERS = 64;
  let workers: FailingWorkers;
  let router: RunningRouter;
  const checks = () => workers.paths.filter((p) => p === "/health").length;

  beforeAll(async () => {
    workers = await startFailingWorkers(WORKERS, "404 Not Found");
    router = await startTestRouter({
      workerUrls: workers.urls,
      healthCheckIntervalSecs: 60,
      healthCheckTimeoutSecs: 5,
      enginePollIntervalSecs: 60,
    });
  }, 30_000);
  afterAll(async () => {
    await router?.stop(100);
    await workers?.close();
  });

  it("start at most MAX_PROBE_STARTS_PER_SEC a second", async () => {
    const { health } = router.context;
    // Start-up's first checks have ended; the bucket refills over a quiet spell.
    await new Promise((resolve) => setTimeout(resolve, 100));
    const before = checks();
    const t0 = performance.now();
    const pass = health.checkAll();
    let worst = 0;
    while (checks() - before < WORKERS) {
      await new Promise((resolve) => setImmediate(resolve));
      const elapsedSec = (performance.now() - t0) / 1000;
      worst = Math.max(worst, checks() - before - MAX_PROBE_STARTS_PER_SEC * elapsedSec);
    }
    await pass;
    // At most the burst (16) over the rate, at any time.
    expect(worst).toBeLessThanOrEqual(17);
  }, 20_000);
});
