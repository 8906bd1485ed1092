import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { HASH_NEGATIVE, HASH_TEXT, HASH_UINT } from "../../src/index/hash-list.js";
import { Hash64Map } from "../../src/index/hash64-map.js";

/** A key as the reference Map sees it. */
type Key = readonly [kind: number, hi: number, lo: number, text: string | undefined];
const name = ([kind, hi, lo, text]: Key) => `${kind}:${hi}:${lo}:${text ?? ""}`;

// Few distinct words, so that keys meet in the table and deletions shift runs back.
const word = fc.constantFrom(0, 1, 2, 0xffffffff, 0x80000000, 12345);
const key: fc.Arbitrary<Key> = fc.oneof(
  fc.tuple(fc.constantFrom(HASH_UINT, HASH_NEGATIVE), word, word, fc.constant(undefined)),
  // Texts whose fingerprints are made equal on purpose: the text alone tells them apart.
  fc.tuple(
    fc.constant(HASH_TEXT),
    fc.constant(7),
    fc.constant(7),
    fc.constantFrom("xab", "xcd", "a", ""),
  ),
);
const op = fc.oneof(
  fc.record({ op: fc.constant("set" as const), key, value: fc.integer() }),
  fc.record({ op: fc.constant("delete" as const), key }),
  fc.record({ op: fc.constant("shift" as const) }),
  fc.record({ op: fc.constant("clear" as const) }),
);

describe("Hash64Map", () => {
  it("behaves as a Map in insertion order, over random operations", () => {
    fc.assert(
      fc.property(fc.array(op, { maxLength: 300 }), fc.nat(), (ops, seed) => {
        const map = new Hash64Map(seed);
        const ref = new Map<string, { key: Key; value: number }>();
        for (const o of ops) {
          if (o.op === "set") {
            map.set(...o.key, o.value);
            const was = ref.get(name(o.key));
            if (was !== undefined) was.value = o.value;
            else ref.set(name(o.key), { key: o.key, value: o.value });
          } else if (o.op === "delete") {
            expect(map.delete(...o.key)).toBe(ref.get(name(o.key))?.value);
            ref.delete(name(o.key));
          } else if (o.op === "shift") {
            const oldest = ref.keys().next();
            expect(map.shift()).toBe(oldest.done ? undefined : ref.get(oldest.value)!.value);
            if (!oldest.done) ref.delete(oldest.value);
          } else {
            map.clear();
            ref.clear();
          }
          expect(map.size).toBe(ref.size);
        }
        const seen: string[] = [];
        map.forEach((kind, hi, lo, text, value) => {
          seen.push(name([kind, hi, lo, text]));
          expect(value).toBe(ref.get(name([kind, hi, lo, text]))!.value);
        });
        expect(seen).toEqual([...ref.keys()]);
        for (const { key: k, value } of ref.values()) expect(map.get(...k)).toBe(value);
      }),
      { numRuns: 300 },
    );
  });

  it("tells apart a negative int, the unsigned int of the same bits, and a text", () => {
    const map = new Hash64Map(1);
    map.set(HASH_UINT, 0xffffffff, 0xffffffff, undefined, 1);
    map.set(HASH_NEGATIVE, 0xffffffff, 0xffffffff, undefined, 2);
    map.set(HASH_TEXT, 0xffffffff, 0xffffffff, "x00", 3);
    expect(map.get(HASH_UINT, 0xffffffff, 0xffffffff)).toBe(1);
    expect(map.get(HASH_NEGATIVE, 0xffffffff, 0xffffffff)).toBe(2);
    expect(map.get(HASH_TEXT, 0xffffffff, 0xffffffff, "x00")).toBe(3);
    expect(map.get(HASH_TEXT, 0xffffffff, 0xffffffff, "x01")).toBeUndefined();
  });

  it("stays at most half full and keeps its size through clear", () => {
    const map = new Hash64Map();
    for (let i = 0; i < 5000; i++) map.set(HASH_UINT, 0, i, undefined, i);
    const { slots, table } = map.allocated;
    expect(table).toBeGreaterThanOrEqual(2 * 5000);
    expect(slots).toBeLessThan(2 * 5000 + 16);
    for (let i = 0; i < 4000; i++) expect(map.shift()).toBe(i);
    map.clear();
    for (let i = 0; i < 5000; i++) map.set(HASH_UINT, 1, i, undefined, i);
    expect(map.allocated).toEqual({ slots, table });
    expect(map.get(HASH_UINT, 1, 4999)).toBe(4999);
    expect(map.get(HASH_UINT, 0, 4999)).toBeUndefined();
  });
});
