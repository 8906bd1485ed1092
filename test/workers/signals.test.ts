import { describe, expect, it } from "vitest";
import { EngineSignals } from "../../src/workers/signals.js";

const LOAD = { queued: 2, running: 3, kvUsage: 0.5 };

describe("EngineSignals", () => {
  it("answers nothing before anything was read", () => {
    const s = new EngineSignals();
    expect(s.capacity(1000)).toBeUndefined();
    expect(s.load(1000)).toBeUndefined();
    expect(s.ageSecs(1000)).toBeUndefined();
  });

  it("ignores signals older than staleAfterMs, keeping the last capacity for the budget", () => {
    const s = new EngineSignals();
    s.staleAfterMs = 15_000;
    s.recordCapacity(400_000, "get_server_info", 1_000);
    s.recordLoad(LOAD, 1_000);
    expect(s.capacity(16_000)).toBe(400_000);
    expect(s.load(16_000)).toEqual(LOAD);
    expect(s.capacity(16_001)).toBeUndefined();
    expect(s.load(16_001)).toBeUndefined();
    expect(s.lastCapacity).toBe(400_000);
    expect(s.ageSecs(16_001)).toBe(15.001);
  });

  it("ages from the last read of anything", () => {
    const s = new EngineSignals();
    s.recordLoad(LOAD, 1_000);
    s.recordSeen(3_000);
    expect(s.ageSecs(4_000)).toBe(1);
  });

  it("keeps each data-parallel rank's series, fresh like the load; a rank's capacity is its own or an equal share", () => {
    const s = new EngineSignals();
    s.staleAfterMs = 15_000;
    s.recordCapacity(1_000_000, "get_server_info", 1_000);
    s.recordLoad(LOAD, 1_000, [{ queued: 0, capacityTokens: 600_000 }, { queued: 2 }]);
    expect(s.rankQueued(1, 16_000)).toBe(2);
    expect(s.rankQueued(2, 16_000)).toBeUndefined();
    expect(s.rankQueued(1, 16_001)).toBeUndefined();
    expect(s.ranks(16_001)).toBeUndefined();
    // Capacities outlive freshness, as lastCapacity does.
    expect(s.rankCapacity(0, 2)).toBe(600_000);
    expect(s.rankCapacity(1, 2)).toBe(500_000);
  });
});
