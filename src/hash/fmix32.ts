/**
 * MurmurHash3's 32-bit finalizer: spreads every input bit over the whole word; an unsigned 32-bit
 * integer. Not cryptographic. Shared by the router's block keys (index/block-keys.ts) and the
 * simulator's hashing (sim/hash.ts); kept out of both so neither depends on the other.
 */
export function fmix32(h: number): number {
  let x = h | 0;
  x ^= x >>> 16;
  x = Math.imul(x, 0x85ebca6b);
  x ^= x >>> 13;
  x = Math.imul(x, 0xc2b2ae35);
  x ^= x >>> 16;
  return x >>> 0;
}
