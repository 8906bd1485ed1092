import { describe, expect, it } from "vitest";
import { OpOrder } from "../../src/state/op-order.js";

describe("OpOrder", () => {
  const now = 1_000_000;
  const order = () => new OpOrder(60_000, () => now);

  it("from a writer it knows, takes only ops after the last one", () => {
    const o = order();
    expect(o.admit("a", { seq: 5, at: now }, true)).toBeUndefined();
    expect(o.admit("a", { seq: 5, at: now }, true)).toBe("replayed");
    expect(o.admit("a", { seq: 3, at: now }, false)).toBe("replayed");
    expect(o.admit("a", { seq: 9, at: now - 3_600_000 }, true)).toBeUndefined();
    expect(o.admit("b", { seq: 1, at: now }, false)).toBeUndefined();
  });

  it("from a writer it does not know, refuses a membership op older than the limit, takes an old decision without vouching for its writer", () => {
    const o = order();
    expect(o.admit("a", { seq: 5, at: now - 60_001 }, true)).toBe("stale");
    expect(o.admit("a", { seq: 6, at: now - 60_001 }, false)).toBeUndefined();
    // The old decision did not make "a" known: its old membership op is still refused.
    expect(o.admit("a", { seq: 7, at: now - 60_001 }, true)).toBe("stale");
    expect(o.admit("a", { seq: 8, at: now + 60_001 }, true)).toBe("stale");
    expect(o.admit("a", { seq: 9, at: now - 59_000 }, true)).toBeUndefined();
    expect(o.admit("a", { seq: 7, at: now }, true)).toBe("replayed");
  });

  it("remembers a bounded number of writers, forgetting the least recently heard", () => {
    const o = order();
    for (let i = 0; i < 5000; i++) o.admit(`w${i}`, { seq: 1, at: now }, false);
    expect(o.admit("w4999", { seq: 1, at: now }, false)).toBe("replayed");
    // Forgotten: judged by age again.
    expect(o.admit("w0", { seq: 1, at: now }, false)).toBeUndefined();
  });
});
