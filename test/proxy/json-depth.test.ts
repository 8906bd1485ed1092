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

describe("NestingScan: the strings of bounded top-level fields, as the body arrives", () => {
  const pieces = (all: Buffer, cuts: number[]) => {
    const at = [...new Set(cuts.map((c) => c % (all.length + 1)))].sort((a, b) => a - b);
    return [0, ...at].map((from, i) => all.subarray(from, at[i] ?? all.length));
  };
  /** Whether the parsed field holds a string longer than `max`: itself or an item of its list. */
  const tooLong = (value: unknown, max: number) =>
    (Array.isArray(value) ? value : [value]).some((v) => typeof v === "string" && v.length > max);

  it("refuses exactly when the parsed field holds a string over the bound, however the bytes are cut", () => {
    // Characters of every UTF-8 length, escapes (quote, backslash, control, lone surrogate).
    const text = fc.string({
      unit: fc.constantFrom("a", "é", "€", "😀", '"', "\\", "\n", "\ud800", "[", "{"),
      maxLength: 12,
    });
    const field = fc.oneof(
      text,
      fc.array(fc.oneof(text, fc.constant(null), fc.nat()), { maxLength: 3 }),
    );
    const other = fc.dictionary(text, fc.oneof(text, fc.array(text, { maxLength: 2 })), {
      maxKeys: 3,
    });
    fc.assert(
      fc.property(
        other,
        field,
        fc.boolean(),
        fc.integer({ min: 0, max: 10 }),
        fc.array(fc.nat(), { maxLength: 8 }),
        (rest, value, escapedKey, max, cuts) => {
          let json = JSON.stringify({ ...rest, lora_path: value, tail: rest });
          // The same key spelled with an escape, as JSON.parse reads it alike.
          if (escapedKey) json = json.replace('"lora_path"', '"lora\\u005fpath"');
          const all = bytes(json);
          const scan = new NestingScan(1000, new Map([["lora_path", max]]));
          const refused = pieces(all, cuts).some((piece) => scan.push(piece));
          const parsed = (JSON.parse(json) as { lora_path: unknown }).lora_path;
          expect(refused).toBe(tooLong(parsed, max));
          if (refused) expect(scan.overlong).toMatchObject({ field: "lora_path" });
        },
      ),
      { numRuns: 1000 },
    );
  });

  it("the same name deeper in the body, or in a list of lists, is not the field", () => {
    const long = "x".repeat(50);
    const scan = () => new NestingScan(1000, new Map([["lora_path", 10]]));
    expect(scan().push(bytes(JSON.stringify({ a: { lora_path: long } })))).toBe(false);
    expect(scan().push(bytes(JSON.stringify({ lora_path: [[long]] })))).toBe(false);
    expect(scan().push(bytes(JSON.stringify([{ lora_path: long }])))).toBe(false);
    expect(scan().push(bytes(JSON.stringify({ [long]: long, lora_path: "ok" })))).toBe(false);
  });

  it("a 5 MB name is refused at the bytes past its bound, not at the body's end", () => {
    const scan = new NestingScan(1000, new Map([["lora_path", 4096]]));
    const head = bytes(`{"text":"hello","lora_path":"${"a".repeat(5000)}`);
    expect(scan.push(head)).toBe(true);
    expect(scan.overlong).toEqual({ field: "lora_path", chars: 4097 });
  });

  it("long strings are skipped whole, escapes and quotes found wherever they fall", () => {
    const content = `${"a".repeat(70_000)}\\"[[[${"b".repeat(40)}\\\\${"c".repeat(100)}`;
    const all = bytes(JSON.stringify({ messages: [{ content }], x: "[".repeat(3) }));
    for (const cut of [1, 16, 17, 70_013, 70_014, 70_015, all.length - 5]) {
      const scan = new NestingScan(3);
      const deep = scan.push(all.subarray(0, cut)) || scan.push(all.subarray(cut));
      expect(deep, `cut at ${cut}`).toBe(false);
      const shallow = new NestingScan(2);
      expect(shallow.push(all.subarray(0, cut)) || shallow.push(all.subarray(cut))).toBe(true);
    }
  });
});
