import { describe, expect, it } from "vitest";
import { isSinglePrompt } from "../../src/intake/single-prompt.js";

describe("isSinglePrompt", () => {
  it("one prompt in every endpoint's shapes", () => {
    expect(isSinglePrompt("chat", { messages: [], n: 4 })).toBe(true);
    expect(isSinglePrompt("completions", { prompt: "hi" })).toBe(true);
    expect(isSinglePrompt("completions", { prompt: [1, 2, 3] })).toBe(true);
    expect(isSinglePrompt("completions", { prompt: ["only one"] })).toBe(true);
    expect(isSinglePrompt("completions", { prompt: [[1, 2]] })).toBe(true);
    expect(isSinglePrompt("generate", { text: "hi" })).toBe(true);
    expect(isSinglePrompt("generate", { input_ids: [1, 2] })).toBe(true);
    expect(isSinglePrompt("embeddings", { input: "hi" })).toBe(true);
  });

  it("batches and malformed prompts are not", () => {
    expect(isSinglePrompt("completions", { prompt: ["a", "b"] })).toBe(false);
    expect(isSinglePrompt("completions", { prompt: [[1], [2]] })).toBe(false);
    expect(isSinglePrompt("completions", {})).toBe(false);
    expect(isSinglePrompt("generate", { text: ["a", "b"] })).toBe(false);
    expect(isSinglePrompt("generate", { text: ["a"] })).toBe(false);
    expect(isSinglePrompt("generate", { input_ids: [[1], [2]] })).toBe(false);
    expect(isSinglePrompt("embeddings", { input: ["a", "b"] })).toBe(false);
  });
});
