import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  bodyForRank,
  clientPinnedRank,
  generateBodyWithRank,
  headersWithRank,
} from "../../src/proxy/dp-rank.js";

describe("sending a request to a data-parallel rank", () => {
  it("adds the X-data-parallel-rank header", () => {
    expect(headersWithRank({ a: "1" }, 3)).toEqual({ a: "1", "x-data-parallel-rank": "3" });
  });

  it("leaves a rank the client pinned (header or either body field) alone", () => {
    expect(clientPinnedRank({ "x-data-parallel-rank": "1" }, undefined)).toBe(true);
    expect(clientPinnedRank({}, Buffer.from('{"text":"a","routed_dp_rank":0}'))).toBe(true);
    expect(clientPinnedRank({}, Buffer.from('{"data_parallel_rank": 1}'))).toBe(true);
    expect(clientPinnedRank({}, Buffer.from('{"text":"a"}'))).toBe(false);
    // A byte search: the name as a string value errs toward the engine's own balancer.
    expect(clientPinnedRank({}, Buffer.from('{"user":"routed_dp_rank"}'))).toBe(true);
  });

  it("puts the rank in SGLang's /generate body only", () => {
    const body = Buffer.from('{"text":"hi"}');
    expect(bodyForRank(body, "/generate", "sglang", 2)?.toString()).toBe(
      '{"data_parallel_rank":2,"text":"hi"}',
    );
    expect(bodyForRank(body, "/v1/completions", "sglang", 2)).toBe(body);
    expect(bodyForRank(body, "/generate", "vllm", 2)).toBe(body);
    expect(bodyForRank(body, "/generate", "sglang", undefined)).toBe(body);
    expect(generateBodyWithRank(Buffer.from(" { } "), 1).toString()).toBe(
      ' {"data_parallel_rank":1 } ',
    );
    expect(generateBodyWithRank(Buffer.from("[1]"), 1).toString()).toBe("[1]");
  });

  it("property: any JSON object keeps its fields and gains the rank", () => {
    fc.assert(
      fc.property(
        fc.dictionary(
          fc.string().filter((k) => k !== "data_parallel_rank" && k !== "__proto__"),
          fc.jsonValue(),
        ),
        fc.nat(63),
        fc.boolean(),
        (object, rank, spaced) => {
          const text = spaced ? ` \n${JSON.stringify(object, null, 2)}\n` : JSON.stringify(object);
          const out = JSON.parse(generateBodyWithRank(Buffer.from(text), rank).toString());
          expect(out).toEqual({ data_parallel_rank: rank, ...JSON.parse(text) });
        },
      ),
    );
  });
});
