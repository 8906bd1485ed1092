import { describe, expect, it } from "vitest";
import { readSglangServerInfo } from "../../src/engines/sglang-server-info.js";
import { SGLANG_SERVER_INFO } from "./samples.js";

describe("readSglangServerInfo", () => {
  it("counts one KV pool per DP rank, and says how many ranks", () => {
    expect(readSglangServerInfo(SGLANG_SERVER_INFO)).toEqual({
      capacityTokens: 1_000_000,
      dpSize: 2,
    });
  });

  it("without dp_size, one pool", () => {
    const { dp_size: _, ...single } = SGLANG_SERVER_INFO;
    expect(readSglangServerInfo(single).capacityTokens).toBe(500_000);
  });

  it("has no capacity when max_total_num_tokens is missing or not a number", () => {
    expect(readSglangServerInfo({ model_path: "m" }).capacityTokens).toBeUndefined();
    expect(
      readSglangServerInfo({ ...SGLANG_SERVER_INFO, max_total_num_tokens: "lots" }).capacityTokens,
    ).toBeUndefined();
  });

  it("reports a capacity of 0 as 0 (the poller refuses it with a log line)", () => {
    expect(readSglangServerInfo({ max_total_num_tokens: 0 }).capacityTokens).toBe(0);
  });

  it.each([null, [], "text", 42])("refuses %j with a TypeError", (body) => {
    expect(() => readSglangServerInfo(body)).toThrow(TypeError);
  });
});
