/**
 * Rendezvous (highest random weight) hashing for prefix_cost's tie-break: every candidate gets a
 * score from the key and its id, and the highest wins. The same key picks the same worker among
 * the same candidates, and removing one worker moves only the keys it had won.
 */

/** Characters of the text past its longest held prefix that name the key (a tenant's prompt). */
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

/**
 * The key of a text whose first `held` characters some worker holds: the next KEY_CHARS
 * characters (what tells one tenant's or conversation's prompt from another's) and `held`.
 * Callers pass `held` rounded down to KEY_ALIGN; the window then still reaches past the prefix.
 */
export function prefixKey(text: string, held: number): number {
  const start = Math.max(0, Math.min(held, text.length));
  return mix(
    fnv1a(text, start, Math.min(text.length, start + KEY_CHARS)) ^ Math.imul(start, 0x9e3779b1),
  );
}

/** The score of one worker for one key; the highest score among the tied candidates wins. */
export function rendezvousScore(key: number, workerId: string): number {
  return mix(fnv1a(workerId, 0, workerId.length, key));
}
