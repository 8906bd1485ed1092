import { describe, expect, it } from "vitest";
import { parseRecord } from "../../src/nginx/log-reader.js";

const line = (fields: Record<string, string>) =>
  `<190>Nov 29 05:00:00 radixgate: ${JSON.stringify({ id: "r1", w: "w", s: "200", us: "200", ht: "0.012", b: "10", pt: "", ct: "", gt: "", ...fields })}`;

describe("parseRecord", () => {
  it("reads a relayed request's end, with the engine's token counts", () => {
    expect(parseRecord(line({ pt: "120", ct: "96", gt: "7" }))).toEqual({
      requestId: "r1",
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

  it("ignores what is not a record", () => {
    expect(parseRecord("garbage")).toBeUndefined();
    expect(parseRecord("<190>x radixgate: {not json")).toBeUndefined();
    expect(parseRecord(line({ id: "" }))).toBeUndefined();
    expect(parseRecord(line({ s: "-" }))).toBeUndefined();
  });
});
