import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { TINY_BOS_ID, tinyTokenizerJson, writeTinyTokenizer } from "../../sim/tiny-tokenizer.js";
import { ConfigError } from "../../src/errors.js";
import { loadLocalTokenizer } from "../../src/kv-events/local-tokenizer.js";
import { TokenizerClient } from "../../src/kv-events/tokenizer-client.js";

const path = writeTinyTokenizer();
const options = { requestTimeoutMs: 5000, maxCachedTokens: 100_000, maxTokens: 100_000 };

describe("loadLocalTokenizer (--tokenizer-path)", () => {
  it("encodes with the model's BPE, and its BOS only when special tokens are asked for", () => {
    const t = loadLocalTokenizer(path);
    const ids = t.encode("The other line", true);
    expect(ids[0]).toBe(TINY_BOS_ID);
    expect(t.encode("The other line", false)).toEqual(ids.slice(1));
    // Merges apply: "the" is one token, not three letters.
    expect(t.encode("the", false)).toHaveLength(1);
  });

  it("refuses a missing file, a file that is not JSON, and JSON that is not a tokenizer, naming the flag", () => {
    const dir = mkdtempSync(join(tmpdir(), "radixgate-bad-tokenizer-"));
    const notJson = join(dir, "a.json");
    writeFileSync(notJson, "{ nope");
    const notTokenizer = join(dir, "b.json");
    writeFileSync(notTokenizer, JSON.stringify({ model: { type: "NoSuchModel" } }));
    for (const bad of [join(dir, "missing.json"), notJson, notTokenizer]) {
      expect(() => loadLocalTokenizer(bad)).toThrow(ConfigError);
      expect(() => loadLocalTokenizer(bad)).toThrow(/^--tokenizer-path /);
    }
  });

  it("takes the model's directory too (as SGLang's router takes --tokenizer-path)", () => {
    expect(loadLocalTokenizer(dirname(path)).encode("the", false)).toEqual(
      loadLocalTokenizer(path).encode("the", false),
    );
  });

  it("reads tokenizer_config.json beside tokenizer.json when there is one", () => {
    const dir = mkdtempSync(join(tmpdir(), "radixgate-tokenizer-config-"));
    writeFileSync(join(dir, "tokenizer.json"), JSON.stringify(tinyTokenizerJson()));
    writeFileSync(join(dir, "tokenizer_config.json"), "not json");
    expect(() => loadLocalTokenizer(join(dir, "tokenizer.json"))).toThrow(/tokenizer_config\.json/);
  });
});

describe("TokenizerClient with a local tokenizer", () => {
  const local = loadLocalTokenizer(path);

  it("tokenizes prompt strings here, as the whole prompt would be, and caches the head before the last line", () => {
    const client = new TokenizerClient({ ...options, local });
    const system = "System: answer in one line.\nContext: the other inn.\n";
    const first = `${system}Question one?`;
    expect(client.known("m", { prompt: first })?.tokens).toEqual(local.encode(first, true));
    // The next prompt with the same first lines encodes only its own last line.
    const second = `${system}Question two!`;
    expect(client.known("m", { prompt: second })?.tokens).toEqual(local.encode(second, true));
    expect(client.cached("m", { prompt: system })).toEqual(local.encode(system, true));
  });

  it("encodes a prompt over maxTokens once: a repeat is answered from the cache's note", () => {
    let encodes = 0;
    const counting = {
      encode: (text: string, special: boolean) => {
        encodes++;
        return local.encode(text, special);
      },
    };
    const client = new TokenizerClient({ ...options, maxTokens: 5, local: counting });
    const prompt = { prompt: "the other line, then the other inn" };
    expect(client.known("m", prompt)?.tokens).toBeUndefined();
    const once = encodes;
    expect(client.known("m", prompt)?.tokens).toBeUndefined();
    expect(client.cached("m", prompt)).toBeUndefined();
    expect(encodes).toBe(once);
    // The note costs the bound what the tokens would have.
    expect(client.size).toBe(local.encode(prompt.prompt, true).length);
  });

  it("leaves chat messages to the worker (the chat template runs there) and does nothing without a tokenizer", () => {
    const client = new TokenizerClient({ ...options, local });
    expect(
      client.known("m", { messages: [{ role: "user", content: "hi" }] })?.tokens,
    ).toBeUndefined();
    expect(new TokenizerClient(options).known("m", { prompt: "hi" })?.tokens).toBeUndefined();
  });

  it("property: line-prefix reuse gives the tokens of the whole prompt", () => {
    const line = fc
      .array(
        fc.constantFrom(
          "the",
          "other",
          "line",
          "inn",
          "a1",
          "x",
          " ",
          "  ",
          ".",
          "\n",
          "\n\n",
          " \n",
        ),
        {
          maxLength: 12,
        },
      )
      .map((parts) => parts.join(""));
    fc.assert(
      fc.property(fc.array(line, { minLength: 1, maxLength: 6 }), (lines) => {
        const client = new TokenizerClient({ ...options, local });
        // Each prompt extends the previous one, as a conversation's turns do.
        let prompt = "";
        for (const l of lines) {
          prompt += `${l}\n`;
          const tail = `${prompt}last`;
          expect(client.known("m", { prompt: tail })?.tokens).toEqual(local.encode(tail, true));
        }
      }),
      { numRuns: 200 },
    );
  });
});
