import { describe, expect, it } from "vitest";
import { RunningReserve } from "../../src/workers/running-reserve.js";

describe("RunningReserve: what a running request holds of the KV beyond its text", () => {
  it("is the last partial block until a completion is reported", () => {
    const r = new RunningReserve();
    expect(r.outputTokens).toBe(0);
    expect(r.chars(4)).toBe(32);
  });

  it("learns the mean completion tokens, and follows a change of workload", () => {
    const r = new RunningReserve();
    for (let i = 0; i < 50; i++) r.observe(100);
    expect(r.outputTokens).toBeCloseTo(100, 6);
    expect(r.chars(4)).toBe((100 + 8) * 4);
    for (let i = 0; i < 300; i++) r.observe(10);
    expect(r.outputTokens).toBeLessThan(12);
  });

  it("skips what is not a token count", () => {
    const r = new RunningReserve();
    for (const bad of [undefined, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 40]) {
      r.observe(bad);
    }
    expect(r.outputTokens).toBe(0);
    r.observe(0);
    expect(r.outputTokens).toBe(0);
    r.observe(20);
    expect(r.outputTokens).toBeGreaterThan(9);
  });
});
