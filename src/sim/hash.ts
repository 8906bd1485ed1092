/**
 * Small deterministic 32-bit hashing shared by the stand-in tokenizer, the KV block index and the
 * fake embeddings. Not cryptographic: it only has to be stable across runs and well mixed.
 */

export const FNV_OFFSET = 0x811c9dc5;
export const FNV_PRIME = 0x01000193;

/** MurmurHash3's 32-bit finalizer: spreads every input bit over the whole word. */
export function fmix32(h: number): number {
  let x = h | 0;
  x ^= x >>> 16;
  x = Math.imul(x, 0x85ebca6b);
  x ^= x >>> 13;
  x = Math.imul(x, 0xc2b2ae35);
  x ^= x >>> 16;
  return x >>> 0;
}

/** FNV-1a over UTF-16 code units, finalized; an unsigned 32-bit integer. */
export function hashString(text: string, seed = FNV_OFFSET): number {
  let h = seed | 0;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), FNV_PRIME);
  return fmix32(h);
}
