/**
 * Rendezvous (highest random weight) hashing for prefix_cost's tie-break: every candidate gets a
 * score from the key and its id, and the highest wins. The same key picks the same worker among
 * the same candidates, and removing one worker moves only the keys it had won.
 */

/** Characters of the text that name the key: the end of the prefix the tied workers hold. */
export const KEY_CHARS = 128;
/** The key starts at a multiple of this, so a few characters more or less held keep the key. */
export const KEY_ALIGN = 64;

/** FNV-1a over the UTF-16 code units of `text` from `start` to `end`. */
function fnv1a(text: string, start: number, end: number, seed = 0x811c9dc5): number {
  let h = seed;
  for (let i = start; i < end; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** murmur3's finalizer: spreads every input bit over the output. */
function mix(h: number): number {
  let x = h ^ (h >>> 16);
  x = Math.imul(x, 0x85ebca6b);
  x ^= x >>> 13;
  x = Math.imul(x, 0xc2b2ae35);
  return (x ^ (x >>> 16)) >>> 0;
}

/** The key of the KEY_CHARS characters of `text` from `start` (and of `start` itself). */
export function prefixKey(text: string, from: number): number {
  const start = Math.max(0, Math.min(from, text.length));
  return mix(
    fnv1a(text, start, Math.min(text.length, start + KEY_CHARS)) ^ Math.imul(start, 0x9e3779b1),
  );
}

/** The score of one worker for one key; the highest score among the tied candidates wins. */
export function rendezvousScore(key: number, workerId: string): number {
  return mix(fnv1a(workerId, 0, workerId.length, key));
}
