import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { generatedText, generatedTokenIds, generatedTokenText } from "../../sim/output-text.js";
import { renderChat } from "../../sim/template.js";
import { countTokens, tokenize, VOCAB_SIZE } from "../../sim/tokenizer.js";

describe("stand-in tokenizer", () => {
  it("is deterministic and maps text to ids in the vocabulary", () => {
    const text = "The quick brown fox jumps over the lazy dog.\nAnd again.";
    expect(tokenize(text)).toEqual(tokenize(text));
    for (const id of tokenize(text)) {
      expect(Number.isInteger(id)).toBe(true);
      expect(id).toBeGreaterThanOrEqual(0);
      expect(id).toBeLessThan(VOCAB_SIZE);
    }
    expect(tokenize("abcd")).not.toEqual(tokenize("abce"));
  });

  it("cuts about four characters per token, restarting at each newline", () => {
    expect(tokenize("")).toEqual([]);
    expect(tokenize("abcdefgh")).toHaveLength(2);
    expect(tokenize("abcdefghi")).toHaveLength(3);
    expect(tokenize("ab\ncdefgh")).toHaveLength(3); // "ab\n", "cdef", "gh"
    expect(tokenize("x".repeat(4000))).toHaveLength(1000);
  });

  it("countTokens agrees with tokenize", () => {
    fc.assert(
      fc.property(fc.string({ unit: fc.constantFrom("a", "b", " ", "\n", "é") }), (s) => {
        expect(countTokens(s)).toBe(tokenize(s).length);
      }),
      { seed: 7, numRuns: 300 },
    );
  });

  it("is prefix-stable at line boundaries: tokenize(a + b) = tokenize(a) ++ tokenize(b) when a ends a line", () => {
    fc.assert(
      fc.property(fc.string(), fc.string(), (a, b) => {
        const line = `${a}\n`;
        expect(tokenize(line + b)).toEqual([...tokenize(line), ...tokenize(b)]);
      }),
      { seed: 11, numRuns: 300 },
    );
  });

  it("re-tokenizes an earlier chat turn to the same ids inside a longer conversation", () => {
    const turn1 = [
      { role: "system", content: "Be brief." },
      { role: "user", content: "Hi there" },
    ];
    const turn2 = [
      ...turn1,
      { role: "assistant", content: "Hello!" },
      { role: "user", content: "More" },
    ];
    const a = tokenize(renderChat(turn1, false));
    expect(tokenize(renderChat(turn2)).slice(0, a.length)).toEqual(a);
  });
});

describe("generated output text", () => {
  it("is four characters per token, predictable, and tokenizes back to the engine's ids", () => {
    for (const n of [0, 1, 7, 19, 20, 21, 100, 257]) {
      const text = generatedText(n);
      expect(text).toHaveLength(4 * n);
      expect(text.includes("\n")).toBe(false);
      expect(tokenize(text)).toEqual(generatedTokenIds(n));
      expect(Array.from({ length: n }, (_, i) => generatedTokenText(i)).join("")).toBe(text);
    }
    expect(generatedText(3)).toBe("The simulate");
  });
});
