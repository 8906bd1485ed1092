import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  HASH_NEGATIVE,
  HASH_TEXT,
  HASH_UINT,
  HashList,
  HashListBuilder,
} from "../../src/index/hash-list.js";

/** Hashes in their string form: 64-bit ints, signed or not, bytes as "x" + hex, other strings. */
const hash = fc.oneof(
  fc.bigInt({ min: -(2n ** 63n), max: 2n ** 64n - 1n }).map(String),
  fc.integer().map(String),
  fc.uint8Array({ maxLength: 32 }).map((b) => `x${Buffer.from(b).toString("hex")}`),
  fc.string(),
  fc.constantFrom("-0", "007", "18446744073709551616", "-9223372036854775809", "1e3"),
);

/** What the tables compare: kind, words and text. */
function identity(list: HashList, i: number): string {
  const at = list.start + i;
  return `${list.kinds[at]}:${list.his[at]}:${list.los[at]}:${list.texts?.[at] ?? ""}`;
}

describe("HashList", () => {
  it("converts hashes to the packed form and back without loss; equal exactly when equal", () => {
    fc.assert(
      fc.property(fc.array(hash, { maxLength: 20 }), (hashes) => {
        const list = HashList.from(hashes);
        expect(list.toStrings()).toEqual(hashes);
        for (let i = 0; i < hashes.length; i++) {
          for (let j = 0; j < hashes.length; j++) {
            expect(identity(list, i) === identity(list, j)).toBe(hashes[i] === hashes[j]);
          }
        }
      }),
      { numRuns: 300 },
    );
  });

  it("holds a 64-bit int by its bits and sign, and a JS number as the same int", () => {
    fc.assert(
      fc.property(fc.maxSafeInteger(), (n) => {
        const out = new HashListBuilder(2);
        out.reserve(2);
        out.setNumber(0, n);
        out.setString(1, String(n));
        const list = out.list(0, 2);
        expect(identity(list, 0)).toBe(identity(list, 1));
        expect(list.at(0)).toBe(String(n));
      }),
    );
    const list = HashList.from(["-1", "18446744073709551615", "x"]);
    expect([...list.kinds]).toEqual([HASH_NEGATIVE, HASH_UINT, HASH_TEXT]);
    expect([list.his[0], list.los[0]]).toEqual([0xffffffff, 0xffffffff]);
    expect([list.his[1], list.los[1]]).toEqual([0xffffffff, 0xffffffff]);
  });

  it("slices are views: a slice of a slice reads the same hashes", () => {
    const hashes = ["1", "x00", "-5", "a", "99"];
    const list = HashList.from(hashes);
    expect(list.slice(1, 4).toStrings()).toEqual(hashes.slice(1, 4));
    expect(list.slice(1, 4).slice(1, 2).toStrings()).toEqual(["-5"]);
    expect(list.slice(3, 10).toStrings()).toEqual(["a", "99"]);
  });
});
