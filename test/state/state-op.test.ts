import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { boundedText, decodeOp, encodeOp, type StateOp } from "../../src/state/state-op.js";

const op: fc.Arbitrary<StateOp> = fc.oneof(
  fc.record(
    {
      kind: fc.constant("insert" as const),
      worker: fc.string(),
      model: fc.string(),
      text: fc.string(),
    },
    { requiredKeys: ["kind", "worker", "text"] },
  ),
  fc.record(
    {
      kind: fc.constant("truncate" as const),
      worker: fc.string(),
      model: fc.string(),
      text: fc.string(),
      keep: fc.nat(),
    },
    { requiredKeys: ["kind", "worker", "text", "keep"] },
  ),
  fc.record({ kind: fc.constant("add" as const), url: fc.webUrl() }),
  fc.record({ kind: fc.constant("remove" as const), url: fc.webUrl() }),
);

describe("state ops on the wire", () => {
  it("decode(encode(op)) gives the op back, with the replica", () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1 }), op, (replica, o) => {
        expect(decodeOp(encodeOp(replica, o))).toEqual({ replica, op: o });
      }),
    );
  });

  it("an entry it cannot read decodes to undefined instead of throwing", () => {
    expect(decodeOp([])).toBeUndefined();
    expect(decodeOp(["r", "x", "k", "z"])).toBeUndefined();
    expect(decodeOp(["r", "x", "k", "i", "w", "id"])).toBeUndefined();
    expect(decodeOp(["r", "x", "k", "t", "w", "id", "x", "t", "n", "-1"])).toBeUndefined();
    expect(decodeOp(["r", "x", "k", "a"])).toBeUndefined();
  });

  it("boundedText keeps the first characters and never splits a surrogate pair", () => {
    expect(boundedText("abcdef", 3)).toBe("abc");
    expect(boundedText("ab", 3)).toBe("ab");
    expect(boundedText("a😀b", 2)).toBe("a");
    fc.assert(
      fc.property(fc.string({ unit: "grapheme" }), fc.integer({ min: 1, max: 20 }), (text, max) => {
        const out = boundedText(text, max);
        expect(text.startsWith(out)).toBe(true);
        expect(out.length).toBeLessThanOrEqual(max);
        expect(out.length).toBeGreaterThanOrEqual(Math.min(text.length, max - 1));
        expect(out).toBe(Buffer.from(out, "utf8").toString("utf8"));
      }),
    );
  });
});
