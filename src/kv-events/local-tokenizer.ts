/**
 * A tokenizer in the router's own process (--tokenizer-path), from the model's Hugging Face
 * `tokenizer.json`, run by @huggingface/tokenizers (pure JS, no native build; BPE, WordPiece and
 * Unigram models with their normalizers, pre-tokenizers and post-processors). It replaces the
 * worker's /tokenize call for prompt strings (completions, /generate text); chat messages still go
 * to the worker's endpoint, because the engine applies the model's chat template first (a Jinja
 * program this router does not run).
 *
 * Special tokens follow what the engine does with a prompt string: vLLM's completions and
 * /tokenize add them by default (`add_special_tokens: true`, vllm/entrypoints/openai/protocol.py
 * TokenizeCompletionRequest), e.g. the BOS token a Llama tokenizer's post-processor puts first.
 */
import { readFileSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { Tokenizer } from "@huggingface/tokenizers";
import { ConfigError } from "../errors.js";

export interface LocalTokenizer {
  /** The token ids of `text`; `addSpecialTokens` as the engine's /tokenize takes it. */
  encode(text: string, addSpecialTokens: boolean): number[];
}

/**
 * Loads `tokenizer.json` (and `tokenizer_config.json` beside it, when there is one: its
 * clean-up and lower-casing options). Throws a ConfigError naming the flag when the file cannot
 * be read or is not a tokenizer the library can run.
 */
export function loadLocalTokenizer(given: string, flag = "--tokenizer-path"): LocalTokenizer {
  // A model directory (as SGLang's router takes it) holds its tokenizer.json.
  const path = isDirectory(given) ? join(given, "tokenizer.json") : given;
  const json = readJson(path, flag);
  if (json === undefined) throw new ConfigError(flag, `cannot read ${path}`);
  const config = readJson(join(dirname(path), "tokenizer_config.json"), flag) ?? {};
  let tokenizer: Tokenizer;
  try {
    tokenizer = new Tokenizer(json, config);
    // A tokenizer whose model the library does not know fails at the first encode, not before.
    tokenizer.encode("a");
  } catch (err) {
    throw new ConfigError(
      flag,
      `${path} is not a tokenizer this router can run: ${(err as Error).message}`,
    );
  }
  return {
    encode: (text, addSpecialTokens) =>
      tokenizer.encode(text, { add_special_tokens: addSpecialTokens }).ids,
  };
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

/** The parsed JSON object in the file; undefined when there is no such file. */
function readJson(path: string, flag: string): object | undefined {
  let raw: string;
  try {
    raw = readFileSync(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw new ConfigError(flag, `cannot read ${path}: ${(err as Error).message}`);
  }
  try {
    const value = JSON.parse(raw) as unknown;
    if (value === null || typeof value !== "object" || Array.isArray(value)) {
      throw new Error("not a JSON object");
    }
    return value;
  } catch (err) {
    throw new ConfigError(flag, `${path} is not valid JSON: ${(err as Error).message}`);
  }
}
