import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  batchSize,
  type JsonObject,
  randomRoom,
  bodyWithBootstrap as spliced,
} from "../../src/disaggregation/bootstrap.js";
import { pairView } from "../../src/disaggregation/pd-body.js";
import {
  decodeBody,
  prefillBody,
  transferParamsOf,
} from "../../src/disaggregation/vllm-transfer.js";
import { WorkerRegistry } from "../../src/workers/registry.js";

const registry = new WorkerRegistry({
  breaker: { failureThreshold: 3, openMs: 1000, successThreshold: 1 },
  connectTimeoutMs: 1000,
});
const prefill = registry.add("http://10.0.0.7:30000", {
  role: { type: "prefill", bootstrapPort: 8998 },
});
/** The body as the pair has it: the client's bytes (compact JSON here) and their parsed object. */
function bodyWithBootstrap(
  body: JsonObject,
  endpoint: string,
  worker: typeof prefill,
  room?: () => string,
  raw = Buffer.from(JSON.stringify(body)),
): Buffer {
  return spliced(raw, pairView("sglang", endpoint, body), worker, room);
}

const v6 = registry.add("http://[fd00::7]:30000", {
  role: { type: "prefill", bootstrapPort: null },
});

describe("SGLang's bootstrap fields (disaggregation/bootstrap.ts)", () => {
  it("adds host, port and a room to a single request, replacing the client's own", () => {
    const out = JSON.parse(
      bodyWithBootstrap(
        { model: "m", prompt: "hi", bootstrap_room: 1 },
        "completions",
        prefill,
        () => "42",
      ).toString(),
    );
    expect(out).toEqual({
      model: "m",
      prompt: "hi",
      bootstrap_host: "10.0.0.7",
      bootstrap_port: 8998,
      bootstrap_room: 42,
    });
  });

  it("arrays for a batch: n > 1 chat choices, a list of prompts, /generate text lists", () => {
    expect(batchSize("chat", { n: 3 })).toBe(3);
    expect(batchSize("chat", { n: 1 })).toBeUndefined();
    expect(batchSize("completions", { prompt: ["a", "b"] })).toBe(2);
    expect(batchSize("completions", { prompt: [1, 2, 3] })).toBeUndefined();
    expect(batchSize("generate", { text: ["a", "b", "c"] })).toBe(3);
    expect(batchSize("generate", { input_ids: [[1], [2]] })).toBe(2);
    const out = JSON.parse(bodyWithBootstrap({ prompt: ["a", "b"] }, "completions", v6).toString());
    expect(out.bootstrap_host).toEqual(["fd00::7", "fd00::7"]);
    expect(out.bootstrap_port).toEqual([null, null]);
    expect(out.bootstrap_room).toHaveLength(2);
  });

  it("a room is an integer in [0, 2^63 - 1], sent exact (beyond a double)", () => {
    fc.assert(
      fc.property(fc.constant(null), () => {
        const room = BigInt(randomRoom());
        return room >= 0n && room <= 2n ** 63n - 1n;
      }),
      { numRuns: 200 },
    );
    const text = bodyWithBootstrap({}, "chat", prefill, () => "9223372036854775807").toString();
    expect(text).toBe(
      '{"bootstrap_host":"10.0.0.7","bootstrap_port":8998,"bootstrap_room":9223372036854775807}',
    );
  });
});

describe("SGLang's bootstrap fields spliced into the client's bytes, not serialized again", () => {
  const endpoints = ["chat", "completions", "generate"] as const;
  const clientBody = fc
    .dictionary(
      fc.string().filter((k) => !k.startsWith("bootstrap_")),
      fc.jsonValue(),
    )
    .chain((obj) =>
      fc.record({
        obj: fc.constant(obj),
        n: fc.option(fc.integer({ min: 0, max: 4 }), { nil: undefined }),
        prompt: fc.option(
          fc.oneof(fc.string(), fc.array(fc.string(), { maxLength: 3 }), fc.array(fc.nat())),
          { nil: undefined },
        ),
        space: fc.constantFrom("", " ", "\n\t "),
      }),
    );

  it("the engine parses what it parsed before the splice: the client's fields and the hand-off ones (property)", () => {
    fc.assert(
      fc.property(clientBody, fc.constantFrom(...endpoints), (c, endpoint) => {
        const body: JsonObject = { ...c.obj };
        if (c.n !== undefined) body.n = c.n;
        if (c.prompt !== undefined) body.prompt = c.prompt;
        const raw = Buffer.from(`${c.space}${JSON.stringify(body, null, c.space ? 1 : 0)}`);
        const out = JSON.parse(
          bodyWithBootstrap(body, endpoint, prefill, () => "7", raw).toString(),
        );
        const n = batchSize(endpoint, body);
        const one = (v: unknown) => (n === undefined ? v : Array(n).fill(v));
        // What the engine parsed before: the client's text (fast-check's -0 is written as 0).
        const before = JSON.parse(raw.toString()) as JsonObject;
        expect(out).toEqual({
          ...before,
          bootstrap_host: one("10.0.0.7"),
          bootstrap_port: one(8998),
          bootstrap_room: one(7),
        });
      }),
      { numRuns: 300 },
    );
  });

  it("keeps the client's bytes: an integer beyond a double goes out exact", () => {
    const raw = Buffer.from('{ "seed": 12345678901234567891, "prompt": "hi" }');
    const out = bodyWithBootstrap(
      { seed: 0, prompt: "hi" },
      "completions",
      prefill,
      () => "1",
      raw,
    );
    expect(out.toString()).toBe(
      '{"bootstrap_host":"10.0.0.7","bootstrap_port":8998,"bootstrap_room":1, "seed": 12345678901234567891, "prompt": "hi" }',
    );
  });

  it("a client's own bootstrap field, however its key is escaped, is replaced, never left to win", () => {
    const raw = Buffer.from('{"prompt":"hi","bootstrap\\u005froom":5}');
    const body = JSON.parse(raw.toString()) as JsonObject;
    expect(body).toHaveProperty("bootstrap_room", 5);
    const text = bodyWithBootstrap(body, "completions", prefill, () => "42", raw).toString();
    expect(text).not.toContain("u005f");
    expect(JSON.parse(text)).toEqual({
      prompt: "hi",
      bootstrap_host: "10.0.0.7",
      bootstrap_port: 8998,
      bootstrap_room: 42,
    });
  });
});

describe("vLLM's transfer params (disaggregation/vllm-transfer.ts), as vLLM's example proxy sends them", () => {
  it("the prefill request: one token, not streamed, no minimum output, asking for a remote decode", () => {
    const out = JSON.parse(
      prefillBody({
        model: "m",
        stream: true,
        stream_options: { include_usage: true },
        max_tokens: 100,
        max_completion_tokens: 100,
        min_tokens: 10,
        min_completion_tokens: 10,
      }).toString(),
    );
    expect(out).toEqual({
      model: "m",
      stream: false,
      max_tokens: 1,
      max_completion_tokens: 1,
      kv_transfer_params: {
        do_remote_decode: true,
        do_remote_prefill: false,
        remote_engine_id: null,
        remote_block_ids: null,
        remote_host: null,
        remote_port: null,
      },
    });
  });

  it("the decode request: the client's, with the prefill answer's params", () => {
    const params = transferParamsOf({ id: "x", kv_transfer_params: { remote_engine_id: "e" } });
    expect(params).toEqual({ remote_engine_id: "e" });
    const out = JSON.parse(
      decodeBody(
        Buffer.from(JSON.stringify({ model: "m", stream: true })),
        params as object as Record<string, unknown>,
      ).toString(),
    );
    expect(out).toEqual({
      model: "m",
      stream: true,
      kv_transfer_params: { remote_engine_id: "e" },
    });
    expect(transferParamsOf({ id: "x" })).toMatch(/no kv_transfer_params/);
    expect(transferParamsOf(undefined)).toMatch(/not a JSON object/);
  });
});
