import { fmix32 } from "../hash/fmix32.js";

/**
 * A text cut into fixed blocks of characters, each named by a chained hash: block i's key covers
 * its own characters and the key of block i - 1, so one key stands for the whole prefix up to its
 * end (seed 001, "Approximate prefix index on the EPP": hash(chunk i) = hash(content + hash(chunk
 * i-1)); GIE pkg/epp/framework/plugins/requestcontrol/dataproducer/approximateprefix/plugin.go;
 * AIBrix pkg/utils/prefixcacheindexer/hash.go getPrefixHashes).
 *
 * - The tail that does not fill a block is dropped (AIBrix's rule; GIE hashes it too): a partial
 *   block changes with every token the client adds, so it would rarely match anyway.
 * - A block boundary that would fall between the two halves of a surrogate pair moves one code
 *   unit on, so every length the index reports is at a code point boundary (prefix-index.ts). A
 *   block is `blockChars` code units, or one more when it ends on such a pair.
 * - The chain starts from the seed mixed with the model key: KV is not shared across models or
 *   adapters (seed 001, "prefix cache needs to be LoRA aware"), so their chains never meet.
 * - Collisions: two 32-bit lanes (a murmur3 round and an xxhash32 round over two code units at a
 *   time) carry the chain; the key is 53 bits of them, exact as a JS number. Among the ~31k blocks
 *   a worker holds, a false match needs two different prefixes with one 53-bit key (~1e-7 per
 *   worker-lifetime of 31k blocks); the index also checks each matched block's parent.
 * - At most `maxBlocks` blocks (GIE maxPrefixBlocksToMatch, 256): per-request work is bounded.
 */
export class BlockChain {
  /** keys[i]: the chained key of block i. */
  readonly keys: Float64Array;
  /** ends[i]: the code unit just after block i. */
  readonly ends: Int32Array;
  /** Blocks cut from the last text. */
  count = 0;
  private lastText: string | undefined;
  private lastModel: string | undefined;
  private readonly seedA: number;
  private readonly seedB: number;

  constructor(
    readonly blockChars: number,
    readonly maxBlocks: number,
    seed: number,
  ) {
    this.keys = new Float64Array(maxBlocks);
    this.ends = new Int32Array(maxBlocks);
    this.seedA = fmix32(seed ^ 0x5bd1e995);
    this.seedB = fmix32(Math.imul(seed, 0x27d4eb2f) ^ 0x165667b1);
  }

  /** Cuts `text` for `model` into the arrays (kept when they already hold this text and model). */
  cut(text: string, model: string | undefined): number {
    if (text === this.lastText && model === this.lastModel) return this.count;
    let a = this.seedA;
    let b = this.seedB;
    if (model !== undefined) {
      // The model's own root: its name's hash, the name's length folded in.
      a = mixBlockA(a, model, 0, model.length);
      b = mixBlockB(b, model, 0, model.length);
    }
    const size = this.blockChars;
    const length = text.length;
    let start = 0;
    let count = 0;
    while (count < this.maxBlocks) {
      let end = start + size;
      if (end > length) break;
      if (end < length && isHigh(text.charCodeAt(end - 1)) && isLow(text.charCodeAt(end))) end++;
      const nextA = mixBlockA(a, text, start, end);
      const nextB = mixBlockB(b ^ a, text, start, end);
      a = nextA;
      b = nextB;
      // 21 bits of lane A over the 32 of lane B: an exact integer below 2^53.
      this.keys[count] = (a >>> 11) * 0x1_0000_0000 + b;
      this.ends[count] = end;
      count++;
      start = end;
    }
    this.count = count;
    this.lastText = text;
    this.lastModel = model;
    return count;
  }

  /** Characters of the first `blocks` blocks of the last text. */
  charsOf(blocks: number): number {
    return blocks === 0 ? 0 : this.ends[blocks - 1]!;
  }

  /** Index of the first block ending past `chars` (count when none does). */
  blockAfter(chars: number): number {
    let i = 0;
    while (i < this.count && this.ends[i]! <= chars) i++;
    return i;
  }
}

function isHigh(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}

function isLow(code: number): boolean {
  return code >= 0xdc00 && code <= 0xdfff;
}

/** Lane A: murmur3's 32-bit body over two code units a word, finalized with the length. */
function mixBlockA(parent: number, text: string, start: number, end: number): number {
  let h = parent | 0;
  let i = start;
  for (; i + 1 < end; i += 2) {
    let k = text.charCodeAt(i) | (text.charCodeAt(i + 1) << 16);
    k = Math.imul(k, 0xcc9e2d51);
    k = (k << 15) | (k >>> 17);
    h ^= Math.imul(k, 0x1b873593);
    h = (h << 13) | (h >>> 19);
    h = (Math.imul(h, 5) + 0xe6546b64) | 0;
  }
  if (i < end) {
    let k = Math.imul(text.charCodeAt(i), 0xcc9e2d51);
    k = (k << 15) | (k >>> 17);
    h ^= Math.imul(k, 0x1b873593);
  }
  return fmix32(h ^ (end - start));
}

/** Lane B: xxhash32's round over the same words, with other primes: independent of lane A. */
function mixBlockB(parent: number, text: string, start: number, end: number): number {
  let h = (parent + 0x165667b1) | 0;
  let i = start;
  for (; i + 1 < end; i += 2) {
    const k = text.charCodeAt(i) | (text.charCodeAt(i + 1) << 16);
    h = (h + Math.imul(k, 0x85ebca77)) | 0;
    h = (h << 13) | (h >>> 19);
    h = Math.imul(h, 0x9e3779b1);
  }
  if (i < end) {
    h = (h + Math.imul(text.charCodeAt(i), 0x27d4eb2f)) | 0;
    h = Math.imul((h << 17) | (h >>> 15), 0x9e3779b1);
  }
  return fmix32(h + Math.imul(end - start, 0xc2b2ae3d));
}
