import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { bodyWithTrailingField } from "../../src/proxy/json-field.js";

const add = (body: string) =>
  bodyWithTrailingField(Buffer.from(body), "cache_salt", '"s"').toString("utf8");

describe("bodyWithTrailingField", () => {
  it("adds the field last, so it wins over the client's own", () => {
    expect(JSON.parse(add('{"cache_salt":"mine","a":1}'))).toEqual({ cache_salt: "s", a: 1 });
    expect(add('{"a":1}')).toBe('{"a":1,"cache_salt":"s"}');
    expect(add(" { } \n")).toBe(' { "cache_salt":"s"} \n');
  });

  it("leaves a body that is not a JSON object as it is", () => {
    for (const body of ["[1]", "", "  ", '"x"', "{"]) expect(add(body)).toBe(body);
  });

  it("any JSON object stays valid and gets the field (property)", () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string(), fc.jsonValue()), fc.boolean(), (obj, spaced) => {
        const text = spaced ? JSON.stringify(obj, null, 2) : JSON.stringify(obj);
        const parsed = JSON.parse(add(text)) as Record<string, unknown>;
        expect(parsed.cache_salt).toBe("s");
      }),
    );
  });
});
