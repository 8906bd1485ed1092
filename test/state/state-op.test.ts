import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { boundedText, decodeOp, encodeOp, type StateOp } from "../../src/state/state-op.js";
import { StateSecret } from "../../src/state/state-secret.js";

const codec = { secret: new StateSecret("a test secret of the fleet"), scope: "fleet:ops" };
const MAX = 1_000_000;

const op: fc.Arbitrary<StateOp> = fc.oneof(
  fc.record(
    {
      kind: fc.constant("insert" as const),
      worker: fc.string(),
      model: fc.string(),
      text: fc.string(),
      // The prefill the decision queued travels with it (peers count it at once).
      uncached: fc.integer({ min: 1, max: 2 ** 40 }),
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
  fc.record(
    {
      kind: fc.constant("add" as const),
      url: fc.webUrl(),
      apiKey: fc.string(),
      // Prefill/decode workers keep their role on the peers (issue 25).
      role: fc.oneof(
        fc.constant({ type: "decode" as const, bootstrapPort: null }),
        fc.record({
          type: fc.constant("prefill" as const),
          bootstrapPort: fc.option(fc.integer({ min: 1, max: 65535 })),
        }),
      ),
    },
    { requiredKeys: ["kind", "url"] },
  ),
  fc.record({ kind: fc.constant("remove" as const), url: fc.webUrl() }),
);

describe("state ops on the wire", () => {
  it("decode(encode(op)) gives the op back, with the replica", () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1 }), op, (replica, o) => {
        expect(decodeOp(encodeOp(replica, o, codec), codec, MAX)).toEqual({ replica, op: o });
      }),
    );
  });

  it("an entry it cannot read is rejected as unreadable instead of throwing", () => {
    const signed = (fields: string[]) => [...fields, "s", codec.secret.sign(codec.scope, fields)];
    const unreadable = { rejected: "unreadable" };
    expect(decodeOp(["r"], codec, MAX)).toEqual(unreadable);
    expect(decodeOp(signed(["r", "x", "k", "z"]), codec, MAX)).toEqual(unreadable);
    expect(decodeOp(signed(["r", "x", "k", "i", "w", "id"]), codec, MAX)).toEqual(unreadable);
    const badKeep = ["r", "x", "k", "t", "w", "id", "x", "t", "n", "-1"];
    expect(decodeOp(signed(badKeep), codec, MAX)).toEqual(unreadable);
    expect(decodeOp(signed(["r", "x", "k", "a"]), codec, MAX)).toEqual(unreadable);
    // A sealed key that does not open: garbage, or sealed for another worker's URL.
    const sealed = codec.secret.seal("k", "http://other:1");
    expect(
      decodeOp(signed(["r", "x", "k", "a", "u", "http://a:1", "a", "junk"]), codec, MAX),
    ).toEqual(unreadable);
    expect(
      decodeOp(signed(["r", "x", "k", "a", "u", "http://a:1", "a", sealed]), codec, MAX),
    ).toEqual(unreadable);
  });

  // Issue 20 item 2: anyone who could XADD to the stream controlled every replica's workers.
  it("an unsigned entry, or one signed with another secret, another stream key or altered after signing, is rejected", () => {
    const add: StateOp = { kind: "add", url: "http://evil:8000" };
    expect(decodeOp(["r", "x", "k", "a", "u", "http://evil:8000"], codec, MAX)).toEqual({
      rejected: "unsigned",
    });
    const otherSecret = { secret: new StateSecret("another fleet's secret"), scope: codec.scope };
    expect(decodeOp(encodeOp("x", add, otherSecret), codec, MAX)).toEqual({
      rejected: "bad_signature",
    });
    const otherScope = { secret: codec.secret, scope: "other:ops" };
    expect(decodeOp(encodeOp("x", add, otherScope), codec, MAX)).toEqual({
      rejected: "bad_signature",
    });
    const altered = encodeOp("x", add, codec).map((f) =>
      f === "http://evil:8000" ? "http://evil:9000" : f,
    );
    expect(decodeOp(altered, codec, MAX)).toEqual({ rejected: "bad_signature" });
    expect(decodeOp(["s", "AAAA", ...encodeOp("x", add, codec)], codec, MAX)).toEqual({
      rejected: "bad_signature",
    });
  });

  it("a text longer than the receiver's --state-max-text-chars is rejected before its signature is computed", () => {
    const insert: StateOp = { kind: "insert", worker: "w1", text: "y".repeat(101) };
    expect(decodeOp(encodeOp("x", insert, codec), codec, 100)).toEqual({ rejected: "oversize" });
    expect(decodeOp(encodeOp("x", insert, codec), codec, 101)).toMatchObject({ op: insert });
    const longUrl: StateOp = { kind: "add", url: `http://a/${"p".repeat(5000)}` };
    expect(decodeOp(encodeOp("x", longUrl, codec), codec, MAX)).toEqual({ rejected: "oversize" });
  });

  it("a worker's API key is sealed on the wire, never in clear", () => {
    const fields = encodeOp(
      "x",
      { kind: "add", url: "http://a:1", apiKey: "sk-very-secret" },
      codec,
    );
    expect(fields.join(" ")).not.toContain("sk-very-secret");
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
