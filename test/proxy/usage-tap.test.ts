import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { UsageTap } from "../../src/proxy/usage-tap.js";

function tapAll(...chunks: string[]) {
  const tap = new UsageTap();
  for (const c of chunks) tap.write(Buffer.from(c));
  return tap.result();
}

// Shapes as the engines send them (format only): vLLM/SGLang OpenAI usage, SGLang /generate meta_info.
const OPENAI_BODY = JSON.stringify({
  id: "cmpl-1",
  object: "chat.completion",
  choices: [{ index: 0, message: { role: "assistant", content: "hi" }, finish_reason: "stop" }],
  usage: {
    prompt_tokens: 1234,
    total_tokens: 1240,
    completion_tokens: 6,
    prompt_tokens_details: { cached_tokens: 1024 },
  },
});

const SSE_STREAM = [
  `data: ${JSON.stringify({ object: "chat.completion.chunk", choices: [{ index: 0, delta: { content: "a" } }], usage: null })}\n\n`,
  `data: ${JSON.stringify({ object: "chat.completion.chunk", choices: [{ index: 0, delta: { content: "b" } }], usage: null })}\n\n`,
  `data: ${JSON.stringify({ object: "chat.completion.chunk", choices: [], usage: { prompt_tokens: 77, completion_tokens: 2, total_tokens: 79, prompt_tokens_details: { cached_tokens: 64 } } })}\n\n`,
  "data: [DONE]\n\n",
].join("");

const SGLANG_GENERATE = JSON.stringify({
  text: "output",
  output_ids: [1, 2, 3],
  meta_info: {
    id: "x",
    finish_reason: { type: "length", length: 3 },
    prompt_tokens: 500,
    completion_tokens: 3,
    cached_tokens: 256,
    e2e_latency: 0.25,
  },
});

describe("UsageTap", () => {
  it("reads prompt and cached tokens from an OpenAI body", () => {
    expect(tapAll(OPENAI_BODY)).toEqual({
      promptTokens: 1234,
      cachedTokens: 1024,
      completionTokens: 6,
    });
  });

  it("reads the final usage chunk of an SSE stream (include_usage)", () => {
    expect(tapAll(SSE_STREAM)).toEqual({ promptTokens: 77, cachedTokens: 64, completionTokens: 2 });
  });

  it("reads SGLang meta_info from /generate, the last streamed chunk winning", () => {
    expect(tapAll(SGLANG_GENERATE)).toEqual({
      promptTokens: 500,
      cachedTokens: 256,
      completionTokens: 3,
    });
    const first = `data: ${JSON.stringify({ text: "a", meta_info: { prompt_tokens: 9, cached_tokens: 0 } })}\n\n`;
    const last = `data: ${JSON.stringify({ text: "ab", meta_info: { prompt_tokens: 9, cached_tokens: 8 } })}\n\n`;
    expect(tapAll(first, last, "data: [DONE]\n\n")).toEqual({ promptTokens: 9, cachedTokens: 8 });
  });

  it("reads completion_tokens (what a tenant quota charges for the output), not its _details", () => {
    const body = JSON.stringify({
      usage: {
        prompt_tokens: 10,
        completion_tokens: 321,
        completion_tokens_details: { reasoning_tokens: 7 },
      },
    });
    expect(tapAll(body)?.completionTokens).toBe(321);
    const streamed = `data: ${JSON.stringify({ text: "ab", meta_info: { prompt_tokens: 9, completion_tokens: 2 } })}\n\n`;
    expect(
      tapAll(streamed, streamed.replace('"completion_tokens":2', '"completion_tokens":40')),
    ).toEqual({
      promptTokens: 9,
      cachedTokens: undefined,
      completionTokens: 40,
    });
  });

  it("reports no cached tokens when the engine does not (vLLM without the details flag)", () => {
    const body = JSON.stringify({
      usage: { prompt_tokens: 10, total_tokens: 11, prompt_tokens_details: null },
    });
    expect(tapAll(body)).toEqual({ promptTokens: 10, cachedTokens: undefined });
  });

  it("finds nothing in a body without usage, or in a stream without include_usage", () => {
    expect(tapAll('{"object":"list","data":[]}')).toBeUndefined();
    expect(
      tapAll(SSE_STREAM.replace(/"usage":\{[^}]*\{[^}]*\}\}/, '"usage":null')),
    ).toBeUndefined();
    expect(tapAll("")).toBeUndefined();
  });

  it("is not fooled by the keys inside generated text, nor by fractions", () => {
    const text = JSON.stringify({
      choices: [{ text: 'say "prompt_tokens": 99 and "cached_tokens":5' }],
      usage: { prompt_tokens: 3 },
    });
    expect(tapAll(text)).toEqual({ promptTokens: 3, cachedTokens: undefined });
    expect(tapAll('{"prompt_tokens": 12.5}')).toBeUndefined();
    expect(tapAll('{"prompt_tokens":1e3}')).toBeUndefined();
    expect(tapAll('{"prompt_tokens" : \n 42 }')).toEqual({
      promptTokens: 42,
      cachedTokens: undefined,
    });
  });

  it("reads a number that ends the body", () => {
    expect(tapAll('{"prompt_tokens":', "17")).toEqual({
      promptTokens: 17,
      cachedTokens: undefined,
    });
  });

  it("gives the same answer however the bytes are split into chunks", () => {
    const bodies = [OPENAI_BODY, SSE_STREAM, SGLANG_GENERATE];
    fc.assert(
      fc.property(
        fc.constantFrom(...bodies),
        fc.array(fc.nat(), { maxLength: 20 }),
        (body, cuts) => {
          const bytes = Buffer.from(body);
          const points = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort(
            (a, b) => a - b,
          );
          const tap = new UsageTap();
          let from = 0;
          for (const p of [...points, bytes.length]) {
            tap.write(bytes.subarray(from, p));
            from = p;
          }
          expect(tap.result()).toEqual(tapAll(body));
        },
      ),
    );
  });
});
