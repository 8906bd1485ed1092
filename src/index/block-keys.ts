/**
 * The router's own chained keys of token blocks: key(i) = mix(key(i - 1), tokens of block i),
 * starting from a root derived from the LoRA adapter name ("" for the base model). Engines' own
 * block hashes cannot be reproduced outside the engine (vLLM seeds them at random), so the precise
 * index maps every engine hash to one of these keys when a BlockStored event brings its tokens.
 *
 * Keys are 53-bit integers (two mixed 32-bit lanes), exact as JS numbers and cheap as Map keys.
 */

import { fmix32 } from "../hash/fmix32.js";

const TWO_32 = 2 ** 32;

/**
 * The key that stands before the first block of a sequence for this adapter and cache salt. vLLM
 * mixes a request's `cache_salt` into its first block's hash only (vllm/v1/core/kv_cache_utils.py
 * generate_block_hash_extra_keys: `cache_salt` when `start_token_idx == 0`; hash_block_tokens
 * hashes the extra keys with the tokens), so every later block differs through its parent: here
 * the salt seeds the root, which has the same effect on the chain.
 */
export function rootKey(lora: string, salt?: string): number {
  const root = unsaltedRoot(lora);
  return salt === undefined || salt === "" ? root : withExtraKey(root, `cache_salt\u0000${salt}`);
}

function unsaltedRoot(lora: string): number {
  let h1 = 0x243f6a88;
  let h2 = 0x85a308d3;
  for (let i = 0; i < lora.length; i++) {
    const c = lora.charCodeAt(i);
    h1 = Math.imul(h1 ^ c, 0x01000193);
    h2 = Math.imul(h2 ^ c, 0x5bd1e995);
  }
  return chain(fmix32(h1) >>> 11, fmix32(h2), [], 0, 0);
}

/** The key of tokens[start, end) following the block whose key is `parent`. */
export function blockKey(parent: number, tokens: readonly number[], start: number, end: number) {
  return chain(Math.floor(parent / TWO_32), parent >>> 0, tokens, start, end);
}

function chain(hi: number, lo: number, tokens: readonly number[], start: number, end: number) {
  let h1 = hi ^ 0x9e3779b9;
  let h2 = lo ^ 0x7f4a7c15;
  for (let i = start; i < end; i++) {
    const t = tokens[i] as number;
    h1 = Math.imul(h1 ^ t, 0x01000193);
    h2 = Math.imul(h2 ^ t, 0xcc9e2d51);
    h2 ^= h2 >>> 15;
  }
  h1 = fmix32(h1 ^ (end - start));
  h2 = fmix32(h2 ^ h1);
  return (h1 >>> 11) * TWO_32 + (h2 >>> 0);
}

/** Keys of the full blocks of `tokens` for one adapter, cache salt and block size. */
export function blockKeys(
  tokens: readonly number[],
  blockSize: number,
  lora: string,
  salt?: string,
): number[] {
  const n = Math.floor(tokens.length / blockSize);
  const keys = new Array<number>(n);
  let parent = rootKey(lora, salt);
  for (let i = 0; i < n; i++) {
    parent = blockKey(parent, tokens, i * blockSize, (i + 1) * blockSize);
    keys[i] = parent;
  }
  return keys;
}

/**
 * A block's key with what else the engine keyed it by (a multimodal item's hash, see
 * BlockStored.mediaKeys): a request's tokens alone never reproduce it, so such a block and every
 * block after it match only what the same event chain brought.
 */
export function withExtraKey(key: number, extra: string): number {
  let h1 = Math.floor(key / TWO_32) ^ 0x6a09e667;
  let h2 = (key >>> 0) ^ 0xbb67ae85;
  for (let i = 0; i < extra.length; i++) {
    const c = extra.charCodeAt(i);
    h1 = Math.imul(h1 ^ c, 0x01000193);
    h2 = Math.imul(h2 ^ c, 0xcc9e2d51);
    h2 ^= h2 >>> 15;
  }
  h1 = fmix32(h1 ^ extra.length);
  h2 = fmix32(h2 ^ h1);
  return (h1 >>> 11) * TWO_32 + (h2 >>> 0);
}
