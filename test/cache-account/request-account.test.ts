import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { AccountWindow, OTHER_KEY } from "../../src/cache-account/account-window.js";
import { RequestAccount } from "../../src/cache-account/request-account.js";
import { TopPrefixes } from "../../src/cache-account/top-prefixes.js";
import { lossReasonOf } from "../../src/scheduling/loss-reason.js";

function decided(available: number, chosen: number, worker = "a") {
  const account = new RequestAccount("x".repeat(4000), "m");
  account.decided({
    worker: { id: worker },
    branch: "cache_miss",
    matchRate: chosen / 4000,
    index: "shared",
    heldBefore: chosen,
    available,
    runnerUp: { id: "b" },
    runnerUpHeld: available,
    lossReason: available > chosen ? "load" : null,
  });
  return account;
}

describe("RequestAccount", () => {
  it("splits any prompt into parts that are never negative and add up to it", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 4000 }),
        fc.integer({ min: 0, max: 4000 }),
        fc.option(fc.integer({ min: 1, max: 2000 }), { nil: undefined }),
        fc.option(fc.integer({ min: 0, max: 3000 }), { nil: undefined }),
        fc.double({ min: 0.5, max: 16, noNaN: true }),
        (x, y, prompt, cached, cpt) => {
          const a = decided(Math.max(x, y), Math.min(x, y));
          a.settle(prompt, cached, cpt);
          const parts = [
            a.reportedTokens ?? 0,
            a.indexLossTokens,
            a.unreportedTokens,
            a.routingLossTokens,
            a.coldTokens,
          ];
          for (const p of parts) expect(p).toBeGreaterThanOrEqual(0);
          expect(parts.reduce((s, p) => s + p, 0)).toBe(a.promptTokens);
        },
      ),
    );
  });

  it("takes the best match over a request's retries, and names a retry away from it a filter loss", () => {
    const a = decided(2000, 2000);
    expect(a.reason).toBeNull();
    a.decided({ ...decidedFacts(), worker: { id: "c" }, heldBefore: 0, available: 400 });
    expect(a.availableChars).toBe(2000);
    expect(a.chosenChars).toBe(0);
    expect(a.reason).toBe("filter");
  });
});

function decidedFacts() {
  return {
    worker: { id: "a" },
    branch: "cache_hit" as const,
    matchRate: 0,
    index: "shared",
    heldBefore: 0,
    available: 0,
    runnerUp: undefined,
    runnerUpHeld: 0,
    lossReason: null,
  };
}

describe("lossReasonOf", () => {
  it("names session, filter, load and unknown", () => {
    expect(lossReasonOf("session", true)).toBe("session");
    expect(lossReasonOf("max_score", true)).toBe("filter");
    expect(lossReasonOf("imbalanced", false)).toBe("load");
    expect(lossReasonOf("lowest_cost", false)).toBe("load");
    expect(lossReasonOf("cache_hit", false)).toBe("load");
    expect(lossReasonOf("peer_claim", false)).toBe("unknown");
    expect(lossReasonOf("ring_home", false)).toBe("unknown");
  });
});

describe("bounded memory", () => {
  it("tracks at most `capacity` prefixes, keeping the ones that lost the most", () => {
    const top = new TopPrefixes(8);
    for (let i = 0; i < 100_000; i++) top.add(`prefix ${i % 5000} ${"y".repeat(300)}`, 300, 1);
    top.add(`heavy ${"z".repeat(300)}`, 300, 1_000_000);
    const listed = top.top(100);
    expect(listed.length).toBeLessThanOrEqual(8);
    expect(listed[0]).toMatchObject({ head: `heavy ${"z".repeat(34)}`, tokens: 1_000_000 });
  });

  it("keeps one row per minute of the window, and a bounded number of workers per minute", () => {
    const window = new AccountWindow(3);
    const minute = 60_000;
    for (let i = 0; i < 1000; i++) {
      const a = decided(100, 0, `w${i}`);
      a.settle(100, 0, 4);
      window.add(a, 10 * minute);
    }
    const snap = window.snapshot(10 * minute);
    expect(snap.all.requests).toBe(1000);
    expect(snap.workers.size).toBeLessThanOrEqual(257);
    expect(snap.workers.get(OTHER_KEY)?.requests).toBe(1000 - 256);
    // Three minutes later that minute has left the window.
    expect(window.snapshot(13 * minute).all.requests).toBe(0);
    expect(window.snapshot(12 * minute).all.requests).toBe(1000);
  });
});
