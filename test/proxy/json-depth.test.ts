import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { nestsDeeperThan, textNestsDeeperThan } from "../../src/proxy/json-depth.js";

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
