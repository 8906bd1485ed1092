import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { modelOf, routingText } from "../../src/proxy/routing-text.js";

describe("routingText", () => {
  it("chat: every message's content in order, not just the first (SGLang router regression)", () => {
    const text = routingText("chat", {
      messages: [
        { role: "system", content: "You are terse." },
        { role: "user", content: "Hi" },
        { role: "assistant", content: "Hello." },
        { role: "tool", content: "42" },
        { role: "user", content: "Again" },
      ],
    });
    for (const part of ["You are terse.", "Hi", "Hello.", "42", "Again"])
      expect(text).toContain(part);
    expect(text.indexOf("You are terse.")).toBeLessThan(text.indexOf("Hi"));
    expect(text.indexOf("Hello.")).toBeLessThan(text.indexOf("Again"));
  });

  it("chat: the text parts of multi-part content, skipping images", () => {
    const text = routingText("chat", {
      messages: [
        {
          role: "user",
          content: [
            { type: "text", text: "Describe " },
            { type: "image_url", image_url: { url: "data:image/png;base64,AAAA" } },
            { type: "text", text: "this picture" },
          ],
        },
      ],
    });
    expect(text).toContain("Describe this picture");
    expect(text).not.toContain("base64");
  });

  it("chat: a growing conversation keeps its earlier routing text as a prefix", () => {
    const turn1 = [
      { role: "system", content: "sys" },
      { role: "user", content: "q1" },
    ];
    const turn2 = [...turn1, { role: "assistant", content: "a1" }, { role: "user", content: "q2" }];
    expect(
      routingText("chat", { messages: turn2 }).startsWith(routingText("chat", { messages: turn1 })),
    ).toBe(true);
  });

  it("chat: message boundaries matter (['ab','c'] differs from ['a','bc'])", () => {
    const a = routingText("chat", {
      messages: [
        { role: "user", content: "ab" },
        { role: "user", content: "c" },
      ],
    });
    const b = routingText("chat", {
      messages: [
        { role: "user", content: "a" },
        { role: "user", content: "bc" },
      ],
    });
    expect(a).not.toBe(b);
  });

  it("chat: tool calls of assistant messages count", () => {
    const text = routingText("chat", {
      messages: [
        {
          role: "assistant",
          content: null,
          tool_calls: [{ function: { name: "lookup", arguments: '{"q":1}' } }],
        },
      ],
    });
    expect(text).toContain('lookup({"q":1})');
  });

  it("completions: prompt as a string or an array", () => {
    expect(routingText("completions", { prompt: "Once upon" })).toBe("Once upon");
    expect(routingText("completions", { prompt: ["a", "b"] })).toBe("a\nb\n");
    expect(routingText("completions", { prompt: [1, 23] })).toBe("1,23,");
  });

  it("token ids never prefix-collide: [1, 2] is not a prefix of [1, 23]", () => {
    expect(
      routingText("completions", { prompt: [1, 23] }).startsWith(
        routingText("completions", { prompt: [1, 2] }),
      ),
    ).toBe(false);
  });

  it("generate: text, else input_ids", () => {
    expect(routingText("generate", { text: "The capital of France" })).toBe(
      "The capital of France",
    );
    expect(routingText("generate", { input_ids: [5, 6, 7] })).toBe("5,6,7,");
    expect(routingText("generate", { input_ids: [[5, 6], [7]] })).toBe("5,6,\n7,\n");
  });

  it("embeddings: input as a string or an array", () => {
    expect(routingText("embeddings", { input: "hello" })).toBe("hello");
    expect(routingText("embeddings", { input: ["x", "y"] })).toBe("x\ny\n");
  });

  it("malformed fields give an empty routing text, not an exception", () => {
    expect(routingText("chat", { messages: "nope" })).toBe("");
    expect(routingText("chat", { messages: [null, 3, { content: 5 }] })).toBe("<>\n");
    expect(routingText("completions", { prompt: { a: 1 } })).toBe("");
    expect(routingText("generate", {})).toBe("");
  });

  it("never throws on any JSON object (property)", () => {
    fc.assert(
      fc.property(
        fc.constantFrom("chat", "completions", "generate", "embeddings" as const),
        fc.object(),
        (endpoint, body) => {
          expect(typeof routingText(endpoint as "chat", body as Record<string, unknown>)).toBe(
            "string",
          );
          modelOf(body as Record<string, unknown>);
        },
      ),
      { numRuns: 300 },
    );
  });

  it("never throws on chat bodies with arbitrary message shapes (property)", () => {
    fc.assert(
      fc.property(fc.array(fc.anything()), (messages) => {
        expect(typeof routingText("chat", { messages })).toBe("string");
      }),
      { numRuns: 300 },
    );
  });
});
