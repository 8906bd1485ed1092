import { describe, expect, it } from "vitest";
import type { TargetResult } from "../../bench/lib/overhead-requests.js";
import { measureRounds, medianResult } from "../../bench/overhead.js";

function result(p50: number, extra: Partial<TargetResult> = {}): TargetResult {
  const latency = { count: 10, mean: p50, p50, p90: p50, p99: p50 * 2, max: p50 * 3 };
  return {
    requests: 10,
    errors: 0,
    latencyMs: latency,
    ttftMs: latency,
    requestsPerSec: 1000 / p50,
    ...extra,
  };
}

describe("bench:overhead's rounds", () => {
  it("measures every target each round, reversing the order every other round", async () => {
    const order: string[] = [];
    await measureRounds(
      [
        ["direct", "http://a"],
        ["router", "http://b"],
        ["nginx", undefined],
        ["router-nginx", "http://c"],
      ],
      3,
      async (_target, name) => {
        order.push(name);
        return result(1);
      },
    );
    expect(order).toEqual([
      "direct (round 1/3)",
      "router (round 1/3)",
      "router-nginx (round 1/3)",
      "router-nginx (round 2/3)",
      "router (round 2/3)",
      "direct (round 2/3)",
      "direct (round 3/3)",
      "router (round 3/3)",
      "router-nginx (round 3/3)",
    ]);
  });

  it("takes each added p50 against the direct run of its own round, and the median of those", async () => {
    // direct drifts with the machine (1, 5, 2 ms); the router stays 0.5 ms above it in every
    // round except one outlier: the median of the paired differences is 0.5, while the
    // difference of the medians would be 1.5.
    const direct = [1, 5, 2];
    const router = [1.5, 5.5, 9];
    const seen = { direct: 0, router: 0 };
    const measured = await measureRounds(
      [
        ["direct", "http://a"],
        ["router", "http://b"],
        ["nginx", undefined],
      ],
      3,
      async (_target, name) => {
        const which = name.startsWith("direct") ? "direct" : "router";
        const p50 = (which === "direct" ? direct : router)[seen[which]++]!;
        return result(p50);
      },
    );
    expect(measured.addedP50("router")).toBeCloseTo(0.5);
    expect(measured.result("nginx")).toBeUndefined();
    expect(measured.result("router")!.latencyMs.p50).toBe(5.5);
    expect(measured.result("router")!.requests).toBe(30);
  });

  it("keeps one round's result as it is, and takes medians per field over several", () => {
    const one = result(2, { cpuMicrosPerRequest: 100 });
    expect(medianResult([one])).toBe(one);
    const merged = medianResult([
      result(1, { cpuMicrosPerRequest: 100, errors: 1 }),
      result(3, { cpuMicrosPerRequest: 300 }),
      result(2, { cpuMicrosPerRequest: 200 }),
    ]);
    expect(merged.latencyMs.p50).toBe(2);
    expect(merged.latencyMs.max).toBe(9);
    expect(merged.cpuMicrosPerRequest).toBe(200);
    expect(merged.firstCpuMicrosPerRequest).toBeUndefined();
    expect(merged.errors).toBe(1);
    expect(merged.requestsPerSec).toBe(500);
  });
});
