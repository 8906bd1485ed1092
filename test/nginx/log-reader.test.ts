import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { parseRecord } from "../../src/nginx/log-reader.js";

const line = (fields: Record<string, string>) =>
  `<190>Nov 29 05:00:00 radixgate: ${JSON.stringify({ id: "r1", w: "w", s: "200", us: "200", ht: "0.012", b: "10", pt: "", ct: "", gt: "", ...fields })}`;

describe("parseRecord", () => {
  it("reads a relayed request's end, with the engine's token counts", () => {
    expect(parseRecord(line({ pt: "120", ct: "96", gt: "7" }))).toEqual({
      key: "r1",
      status: 200,
      upstreamStatus: 200,
      headerMs: 12,
      usage: { promptTokens: 120, cachedTokens: 96, completionTokens: 7 },
    });
  });

  it("takes the last upstream of a retried request, and no usage when none was reported", () => {
    const record = parseRecord(line({ us: "502, 200", ht: "0.001, 0.250" }));
    expect(record?.upstreamStatus).toBe(200);
    expect(record?.headerMs).toBe(250);
    expect(record?.usage).toBeUndefined();
  });

  it("reads a client gone before any header as 499 without an upstream status", () => {
    const record = parseRecord(line({ s: "499", us: "-", ht: "-" }));
    expect(record).toMatchObject({ status: 499, upstreamStatus: undefined, headerMs: undefined });
  });

  it("reads a Responses answer's id when it has the engines' shape, and nothing else", () => {
    expect(parseRecord(line({ ri: "resp_0f3a9c" }))?.responseId).toBe("resp_0f3a9c");
    for (const ri of ["", "-", "chatcmpl-1", "resp", `resp_${"x".repeat(201)}`])
      expect(parseRecord(line({ ri }))?.responseId).toBeUndefined();
    // The flat reader and JSON.parse (a line with an escape) agree.
    expect(parseRecord(line({ ri: "resp_1", w: 'a"b' }))?.responseId).toBe("resp_1");
  });

  it("ignores what is not a record", () => {
    expect(parseRecord("garbage")).toBeUndefined();
    expect(parseRecord("<190>x radixgate: {not json")).toBeUndefined();
    expect(parseRecord(line({ id: "" }))).toBeUndefined();
    expect(parseRecord(line({ s: "-" }))).toBeUndefined();
  });
});

describe("parseRecord, every field, whatever the values", () => {
  const count = fc.option(fc.nat({ max: 10_000_000 }).map(String), { nil: "" });
  const seconds = fc.option(
    fc.integer({ min: 0, max: 600_000 }).map((ms) => (ms / 1000).toFixed(3)),
    { nil: "-" },
  );

  it("reads the same record as the JSON it is, escapes, extra fields and field order included", () => {
    fc.assert(
      fc.property(
        fc.record({
          id: fc.string({ minLength: 1, maxLength: 40 }),
          w: fc.string({ maxLength: 20 }),
          s: fc.integer({ min: 100, max: 599 }).map(String),
          us: fc.option(fc.integer({ min: 100, max: 599 }).map(String), { nil: "-" }),
          ht: seconds,
          b: fc.nat().map(String),
          pt: count,
          ct: count,
          gt: count,
        }),
        fc.boolean(),
        (fields, reorder) => {
          const entries = Object.entries(fields);
          if (reorder) entries.reverse();
          const text = `<190>Nov 29 05:00:00 radixgate: ${JSON.stringify(Object.fromEntries(entries))}`;
          const record = parseRecord(text);
          expect(record).toEqual({
            key: fields.id,
            status: Number(fields.s),
            upstreamStatus: fields.us === "-" ? undefined : Number(fields.us),
            headerMs: fields.ht === "-" ? undefined : Number(fields.ht) * 1000,
            usage:
              fields.pt === ""
                ? undefined
                : {
                    promptTokens: Number(fields.pt),
                    cachedTokens: fields.ct === "" ? undefined : Number(fields.ct),
                    completionTokens: fields.gt === "" ? undefined : Number(fields.gt),
                  },
          });
        },
      ),
      { numRuns: 300 },
    );
  });

  it("reads nothing from a cut or malformed line, and never throws", () => {
    const whole = line({ pt: "120", ct: "96", gt: "7" });
    for (let end = whole.indexOf("{"); end < whole.length; end++)
      expect(parseRecord(whole.slice(0, end))).toBeUndefined();
    fc.assert(
      fc.property(fc.string({ maxLength: 200 }), (text) => {
        parseRecord(`<190>x radixgate: {${text}`);
      }),
      { numRuns: 300 },
    );
  });
});
