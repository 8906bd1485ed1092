/**
 * A tiny Hugging Face tokenizer.json for tests and benchmarks (no download): a BPE model over lower-case letters,
 * digits and a few punctuation marks with a handful of merges, a Lowercase normalizer, the
 * Whitespace pre-tokenizer, and a TemplateProcessing post-processor that puts a BOS token `<s>`
 * first, as Llama's does. Written to a fresh temporary directory; returns the file's path.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export const TINY_BOS_ID = 1;

export function tinyTokenizerJson(): Record<string, unknown> {
  const vocab: Record<string, number> = { "[UNK]": 0, "<s>": TINY_BOS_ID };
  for (const c of "abcdefghijklmnopqrstuvwxyz0123456789.,:;!?'-")
    vocab[c] = Object.keys(vocab).length;
  const merges = ["t h", "th e", "a n", "e r", "i n", "o n", "o r", "l i", "li ne", "e n", "a t"];
  for (const m of merges) vocab[m.replace(" ", "")] = Object.keys(vocab).length;
  const special = (id: number, content: string) => ({
    id,
    content,
    single_word: false,
    lstrip: false,
    rstrip: false,
    normalized: false,
    special: true,
  });
  return {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: [special(0, "[UNK]"), special(TINY_BOS_ID, "<s>")],
    normalizer: { type: "Lowercase" },
    pre_tokenizer: { type: "Whitespace" },
    post_processor: {
      type: "TemplateProcessing",
      single: [{ SpecialToken: { id: "<s>", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } }],
      pair: [
        { SpecialToken: { id: "<s>", type_id: 0 } },
        { Sequence: { id: "A", type_id: 0 } },
        { Sequence: { id: "B", type_id: 1 } },
      ],
      special_tokens: { "<s>": { id: "<s>", ids: [TINY_BOS_ID], tokens: ["<s>"] } },
    },
    decoder: null,
    model: {
      type: "BPE",
      dropout: null,
      unk_token: "[UNK]",
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: false,
      byte_fallback: false,
      vocab,
      merges,
    },
  };
}

/** Writes the tiny tokenizer.json into a new temporary directory and returns its path. */
export function writeTinyTokenizer(): string {
  const dir = mkdtempSync(join(tmpdir(), "radixgate-tokenizer-"));
  const path = join(dir, "tokenizer.json");
  writeFileSync(path, JSON.stringify(tinyTokenizerJson()));
  return path;
}
