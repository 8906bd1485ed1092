/**
 * Small deterministic 32-bit hashing shared by the stand-in tokenizer, the KV block index and the
 * fake embeddings. Not cryptographic: it only has to be stable across runs and well mixed.
 */

import { fmix32 } from "../src/hash/fmix32.js";

export const FNV_OFFSET = 0x811c9dc5;
export const FNV_PRIME = 0x01000193;

/** FNV-1a over UTF-16 code units, finalized; an unsigned 32-bit integer. */
export function hashString(text: string, seed = FNV_OFFSET): number {
  let h = seed | 0;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), FNV_PRIME);
  return fmix32(h);
}
