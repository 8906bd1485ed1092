import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { retryAfterSecs } from "../../src/errors.js";
import { fits, msUntilFits, slidingUsage, WINDOW_MS } from "../../src/quotas/window.js";

const MINUTE = 1000 * WINDOW_MS; // the start of some minute

describe("tokens per minute: the sliding window of two fixed minutes", () => {
  it("weighs the previous minute by the part of it still inside the last 60 s", () => {
    expect(slidingUsage(600, 100, MINUTE)).toBe(700);
    expect(slidingUsage(600, 100, MINUTE + 15_000)).toBe(550);
    expect(slidingUsage(600, 100, MINUTE + 45_000)).toBe(250);
  });

  it("lets a request pass while its tokens fit, and one larger than the limit once the window is empty", () => {
    expect(fits(0, 900, 100, 1000, MINUTE)).toBe(true);
    expect(fits(0, 901, 100, 1000, MINUTE)).toBe(false);
    expect(fits(0, 0, 5000, 1000, MINUTE)).toBe(true);
    expect(fits(0, 1, 5000, 1000, MINUTE)).toBe(false);
  });

  it("says when the tokens fit: inside this minute as the previous one fades, or in the next", () => {
    // 1000 of the previous minute, 0 now, limit 1000: 500 fit once half of it has faded.
    expect(msUntilFits(1000, 0, 500, 1000, MINUTE)).toBe(30_000);
    // This minute alone is over: wait for the next, then for this one to fade enough.
    expect(msUntilFits(0, 1000, 500, 1000, MINUTE + 10_000)).toBe(50_000 + 30_000);
    expect(msUntilFits(0, 0, 10, 1000, MINUTE)).toBe(0);
    expect(retryAfterSecs(0)).toBe(1);
    expect(retryAfterSecs(30_001)).toBe(31);
  });

  it("the time it gives is when the tokens first fit (property)", () => {
    fc.assert(
      fc.property(
        fc.nat(5000),
        fc.nat(5000),
        fc.integer({ min: 1, max: 3000 }),
        fc.integer({ min: 1, max: 4000 }),
        fc.nat(WINDOW_MS - 1),
        (prev, cur, cost, limit, offset) => {
          const now = MINUTE + offset;
          const wait = msUntilFits(prev, cur, cost, limit, now);
          // With nothing more charged: at `now + wait` the counts have moved on by whole minutes.
          const at = now + wait;
          const passed = Math.floor(at / WINDOW_MS) - Math.floor(now / WINDOW_MS);
          const [p, c] = passed === 0 ? [prev, cur] : passed === 1 ? [cur, 0] : [0, 0];
          expect(fits(p, c, cost, limit, at)).toBe(true);
          if (wait > 1) {
            const before = at - 2;
            const gone = Math.floor(before / WINDOW_MS) - Math.floor(now / WINDOW_MS);
            const [bp, bc] = gone === 0 ? [prev, cur] : gone === 1 ? [cur, 0] : [0, 0];
            expect(fits(bp, bc, cost, limit, before)).toBe(false);
          }
          expect(wait).toBeLessThanOrEqual(2 * WINDOW_MS);
        },
      ),
    );
  });
});
