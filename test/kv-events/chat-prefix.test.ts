import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { chatKey, chatPrefixProbes } from "../../src/kv-events/chat-prefix.js";

const message = fc.record({
  role: fc.constantFrom("system", "developer", "user", "assistant"),
  content: fc.string(),
});

describe("chatPrefixProbes", () => {
  it("probes each earlier turn under the very key a request with those messages is cached by (fast-check)", () => {
    fc.assert(
      fc.property(fc.array(message, { maxLength: 9 }), fc.option(fc.string()), (messages, m) => {
        const model = m ?? undefined;
        const { probes, totalChars } = chatPrefixProbes(model, messages);
        expect(totalChars).toBe(JSON.stringify(messages).length);
        const turnKeys = probes.filter((p) => p.key.startsWith("m\u0000")).map((p) => p.key);
        const expected: string[] = [];
        for (let end = messages.length - 1; end >= Math.max(1, messages.length - 4); end--)
          expected.push(chatKey(model, messages.slice(0, end)));
        expect(turnKeys).toEqual(expected);
        for (const probe of probes) expect(probe.key.endsWith("]")).toBe(true);
      }),
    );
  });
});
