import { describe, expect, it } from "vitest";
import { Worker } from "../../src/workers/worker.js";

function worker(): Worker {
  return new Worker("w1", "http://127.0.0.1:1", {
    breaker: { failureThreshold: 5, openMs: 1000, successThreshold: 1 },
    connectTimeoutMs: 1000,
  });
}

describe("Worker.engineQueuedAt (the queue prefix_cost reads)", () => {
  it("is the engine's reported queue while fresh, and undefined when unknown or stale", async () => {
    const w = worker();
    try {
      expect(w.engineQueuedAt(Date.now())).toBeUndefined();
      w.signals.staleAfterMs = 15_000;
      const load = { queued: 3, running: 1, kvUsage: 0.2 };
      w.signals.recordLoad(load, Date.now());
      expect(w.engineQueuedAt(Date.now())).toBe(3);
      w.signals.recordLoad(load, Date.now() - 60_000);
      expect(w.engineQueuedAt(Date.now())).toBeUndefined();
      // Judged at the instant the caller passes, not the worker's own clock.
      const at = Date.now();
      w.signals.recordLoad(load, at);
      expect(w.engineQueuedAt(at + 15_000)).toBe(3);
      expect(w.engineQueuedAt(at + 15_001)).toBeUndefined();
      w.signals.recordLoad({ ...load, queued: undefined }, Date.now());
      expect(w.engineQueuedAt(Date.now())).toBeUndefined();
    } finally {
      await w.pool.close();
    }
  });
});
