import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { NestingScan, nestsDeeperThan, textNestsDeeperThan } from "../../src/proxy/json-depth.js";

const bytes = (text: string) => Buffer.from(text, "utf8");

describe("textNestsDeeperThan: the nesting of JSON text, read from its bytes", () => {
  it("agrees with the nesting of the parsed value, whatever strings hold", () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 8 }), fc.integer({ min: 0, max: 9 }), (value, limit) => {
        const text = JSON.stringify(value);
        expect(textNestsDeeperThan(bytes(text), limit)).toBe(nestsDeeperThan(value, limit));
      }),
      { numRuns: 500 },
    );
  });

  it("skips brackets inside strings, escaped quotes included", () => {
    const text = JSON.stringify({ a: '[[[["\\"[[[', b: ["]]]", "{{{"] });
    expect(textNestsDeeperThan(bytes(text), 2)).toBe(false);
    expect(textNestsDeeperThan(bytes(text), 1)).toBe(true);
  });

  it("finds 120,000 levels in a quarter of a megabyte", () => {
    const deep = `{"x":${"[".repeat(120_000)}${"]".repeat(120_000)}}`;
    expect(textNestsDeeperThan(bytes(deep))).toBe(true);
  });
});

describe("NestingScan: the same, read piece by piece as a body arrives", () => {
  /** The text's bytes cut at `cuts` (positions, any order, repeats and ends allowed). */
  const pieces = (all: Buffer, cuts: number[]) => {
    const at = [...new Set(cuts.map((c) => c % (all.length + 1)))].sort((a, b) => a - b);
    return [0, ...at].map((from, i) => all.subarray(from, at[i] ?? all.length));
  };

  it("any cut of the text into pieces gives the answer of the whole, escapes cut in two included", () => {
    // Strings full of backslashes, quotes and brackets: a cut falls between `\` and what it escapes.
    const tricky = fc.stringMatching(/^[\\"[\]{}a]{0,12}$/);
    const value = fc.letrec((tie) => ({
      node: fc.oneof(
        { depthSize: "small" },
        tricky,
        fc.array(tie("node"), { maxLength: 3 }),
        fc.dictionary(tricky, tie("node"), { maxKeys: 3 }),
      ),
    })).node;
    fc.assert(
      fc.property(
        value,
        fc.integer({ min: 0, max: 6 }),
        fc.array(fc.nat(), { maxLength: 8 }),
        (v, limit, cuts) => {
          const all = bytes(JSON.stringify(v));
          const scan = new NestingScan(limit);
          const deep = pieces(all, cuts).some((piece) => scan.push(piece));
          expect(deep).toBe(textNestsDeeperThan(all, limit));
          expect(deep).toBe(nestsDeeperThan(v, limit));
        },
      ),
      { numRuns: 1000 },
    );
  });

  it("an escape cut at a piece's end: the escaped quote does not end the string", () => {
    const scan = new NestingScan(1);
    expect(scan.push(bytes('{"a":"x\\'))).toBe(false);
    // The quote is escaped: the brackets after it are still inside the string.
    expect(scan.push(bytes('"[[[[",'))).toBe(false);
    expect(scan.push(bytes('"b":1}'))).toBe(false);
    expect(new NestingScan(1).push(bytes('{"a":"x\\"[[[[","b":1}'))).toBe(false);
  });

  it("stops at the byte that proves it: a 240 KB body nested from its start is decided in its first KB", () => {
    const scan = new NestingScan(1000);
    const head = bytes(`{"messages":[],"extra":${"[".repeat(1000)}`);
    expect(scan.push(head)).toBe(true);
  });
});
