import { describe, expect, it } from "vitest";
import { summarizeBody } from "../../src/intake/body-summary.js";
import type { Endpoint } from "../../src/intake/routing-text.js";

const has = (endpoint: Endpoint, body: object) =>
  summarizeBody(endpoint, Buffer.from(JSON.stringify(body)), 10_000).answerHasUsage;

describe("answerHasUsage: whether the engine's answer can carry its token counts", () => {
  const chat = { messages: [{ role: "user", content: "hi" }] };
  it("every answer that is not streamed", () => {
    expect(has("chat", chat)).toBe(true);
    expect(has("completions", { prompt: "hi" })).toBe(true);
  });

  it("an OpenAI stream only with stream_options.include_usage", () => {
    expect(has("chat", { ...chat, stream: true })).toBe(false);
    expect(has("completions", { prompt: "hi", stream: true })).toBe(false);
    expect(has("chat", { ...chat, stream: true, stream_options: { include_usage: false } })).toBe(
      false,
    );
    expect(has("chat", { ...chat, stream: true, stream_options: { include_usage: true } })).toBe(
      true,
    );
    expect(has("completions", { prompt: "hi", stream: true, stream_options: null })).toBe(false);
  });

  it("SGLang's /generate streams (meta_info in every chunk) and other endpoints' streams", () => {
    expect(has("generate", { text: "hi", stream: true })).toBe(true);
    expect(has("responses", { input: "hi", stream: true })).toBe(true);
  });
});
