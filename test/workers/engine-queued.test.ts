import { describe, expect, it } from "vitest";
import { Worker } from "../../src/workers/worker.js";

function worker(): Worker {
  return new Worker("w1", "http://127.0.0.1:1", {
    breaker: { failureThreshold: 5, openMs: 1000, successThreshold: 1 },
    connectTimeoutMs: 1000,
  });
}

const LOAD = { queued: 3, running: 1, kvUsage: 0.2 };

describe("Worker.foreignQueuedAt (the foreign queue prefix_cost reads)", () => {
  it("is the engine's reported queue while fresh, and undefined when unknown or stale", async () => {
    const w = worker();
    try {
      expect(w.foreignQueuedAt(Date.now())).toBeUndefined();
      w.signals.staleAfterMs = 15_000;
      w.signals.recordLoad(LOAD, Date.now());
      expect(w.foreignQueuedAt(Date.now())).toBe(3);
      w.signals.recordLoad(LOAD, Date.now() - 60_000);
      expect(w.foreignQueuedAt(Date.now())).toBeUndefined();
      // Judged at the instant the caller passes, not the worker's own clock.
      const at = Date.now();
      w.signals.recordLoad(LOAD, at);
      expect(w.foreignQueuedAt(at + 15_000)).toBe(3);
      expect(w.foreignQueuedAt(at + 15_001)).toBeUndefined();
      w.signals.recordLoad({ ...LOAD, queued: undefined }, Date.now());
      expect(w.foreignQueuedAt(Date.now())).toBeUndefined();
    } finally {
      await w.pool.close();
    }
  });

  it("does not count the router's own requests twice: those pending at the report are subtracted", async () => {
    const w = worker();
    try {
      w.signals.staleAfterMs = 15_000;
      w.signals.recordLoad({ ...LOAD, routerPending: 2 }, Date.now());
      expect(w.foreignQueuedAt(Date.now())).toBe(1);
      w.signals.recordLoad({ ...LOAD, routerPending: 5 }, Date.now());
      expect(w.foreignQueuedAt(Date.now())).toBe(0);
    } finally {
      await w.pool.close();
    }
  });

  it("counts against the router's requests at the report, not today's (regression: stale phantom queue)", async () => {
    const w = worker();
    try {
      w.signals.staleAfterMs = 15_000;
      // The engine reported 3 waiting, all three this router's; seconds later they have all
      // started and the router has none pending there. That is not foreign work.
      const pending = [1, 2, 3].map(() => w.dispatch({ textChars: 10, uncachedChars: 10 }));
      expect(w.pendingPrefillRequests).toBe(3);
      w.signals.recordLoad({ ...LOAD, routerPending: 3 }, Date.now());
      for (const lease of pending) lease.firstByte();
      expect(w.pendingPrefillRequests).toBe(0);
      expect(w.foreignQueuedAt(Date.now())).toBe(0);
    } finally {
      await w.pool.close();
    }
  });
});
