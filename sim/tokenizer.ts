/**
 * A deterministic stand-in for a real tokenizer: about 4 characters per token. Each line (up to
 * and including its "\n") is cut into 4-character chunks and each chunk maps to an id by a hash.
 *
 * Restarting the chunking at every newline makes tokenization prefix-stable at line boundaries,
 * as special tokens make real chat templates: tokenize(a + b) = tokenize(a) ++ tokenize(b) whenever
 * `a` ends with "\n". A multi-turn chat therefore re-tokenizes its history to the same ids.
 */
import { fmix32 } from "../src/hash/fmix32.js";
import { FNV_OFFSET, FNV_PRIME } from "./hash.js";

/** Llama 3's vocabulary size: ids are in [0, VOCAB_SIZE). */
export const VOCAB_SIZE = 128_256;
export const CHARS_PER_TOKEN = 4;
const NEWLINE = 10;

export function tokenize(text: string): number[] {
  const ids: number[] = [];
  let h = FNV_OFFSET;
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    h = Math.imul(h ^ c, FNV_PRIME);
    n++;
    if (n === CHARS_PER_TOKEN || c === NEWLINE) {
      ids.push(fmix32(h) % VOCAB_SIZE);
      h = FNV_OFFSET;
      n = 0;
    }
  }
  if (n > 0) ids.push(fmix32(h) % VOCAB_SIZE);
  return ids;
}

/** tokenize(text).length without building the array. */
export function countTokens(text: string): number {
  let count = 0;
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    n++;
    if (n === CHARS_PER_TOKEN || text.charCodeAt(i) === NEWLINE) {
      count++;
      n = 0;
    }
  }
  return n > 0 ? count + 1 : count;
}

export function isTokenId(value: unknown): value is number {
  return typeof value === "number" && Number.isInteger(value) && value >= 0 && value < VOCAB_SIZE;
}
