import { describe, expect, it } from "vitest";
import { routingText } from "../../src/intake/routing-text.js";
import { tokenizeInputOf } from "../../src/intake/tokenize-input.js";

const image = { type: "image_url", image_url: { url: "https://example.com/a.png" } };

describe("tokenizeInputOf: chats with media", () => {
  it("a chat without media is tokenized whole", () => {
    const messages = [{ role: "user", content: [{ type: "text", text: "hi" }] }];
    expect(tokenizeInputOf("chat", { messages })).toEqual({ messages });
  });

  it("a chat with an image: only the messages before it, with their share of the routing text", () => {
    const system = { role: "system", content: "You describe images. ".repeat(10) };
    const body = {
      messages: [
        system,
        { role: "user", content: [{ type: "text", text: "What is this?" }, image] },
        { role: "assistant", content: "A cat." },
      ],
    };
    const text = routingText("chat", body);
    const input = tokenizeInputOf("chat", body, text);
    expect(input).toMatchObject({ leadingMessages: [system] });
    const share = (input as { share: number }).share;
    expect(share).toBeCloseTo(routingText("chat", { messages: [system] }).length / text.length);
    expect(share).toBeGreaterThan(0);
    expect(share).toBeLessThan(1);
  });

  it("nothing to tokenize when the first message already holds media", () => {
    const body = { messages: [{ role: "user", content: [image] }] };
    expect(tokenizeInputOf("chat", body, routingText("chat", body))).toBeUndefined();
  });
});
