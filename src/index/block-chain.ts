import { fmix32 } from "../hash/fmix32.js";

/**
 * A text cut into fixed blocks of characters, each named by a chained hash: block i's key covers
 * its own characters and the key of block i - 1, so one key stands for the whole prefix up to its
 * end (seed 001, "Approximate prefix index on the EPP": hash(chunk i) = hash(content + hash(chunk
 * i-1)); GIE pkg/epp/framework/plugins/requestcontrol/dataproducer/approximateprefix/plugin.go
 * `PrepareRequestData` → `hashPrompt`;
 * AIBrix pkg/utils/prefixcacheindexer/hash.go getPrefixHashes).
 *
 * - The tail that does not fill a block is dropped (AIBrix's rule; GIE hashes it too): a partial
 *   block changes with every token the client adds, so it would rarely match anyway.
 * - A block boundary that would fall between the two halves of a surrogate pair moves one code
 *   unit on, so every length the index reports is at a code point boundary (prefix-index.ts). A
 *   block is `blockChars` code units, or one more when it ends on such a pair.
 * - The chain starts from the seed mixed with the model key: KV is not shared across models or
 *   adapters (seed 001, "prefix cache needs to be LoRA aware"), so their chains never meet.
 * - The hash: the text is copied once into a buffer as UTF-16 (native, no per-character JS) and
 *   read two code units a word into four xxhash32-style accumulators (independent multiply
 *   chains, so the CPU overlaps them: a JS loop over charCodeAt cost several times more). The
 *   accumulators, started from the parent block's two 32-bit words, end in two 32-bit words.
 * - Collisions: the key is 53 bits of those two words. Among the ~31k
 *   blocks a worker holds, two different prefixes share a key with a probability of about
 *   n²/2^54 (~5e-8); the index also checks each matched block's parent key.
 * - At most `maxBlocks` blocks (GIE maxPrefixBlocksToMatch, 256): per-request work is bounded.
 */
export class BlockChain {
  /** The chained key of block i: 21 high bits in his[i], 32 low bits in los[i]. */
  readonly his: Int32Array;
  readonly los: Int32Array;
  /** ends[i]: the code unit just after block i. */
  readonly ends: Int32Array;
  /** Blocks cut from the last text. */
  count = 0;
  private lastText: string | undefined;
  private lastModel: string | undefined;
  private readonly seedA: number;
  private readonly seedB: number;
  /** Code units past which no block can start (maxBlocks blocks of at most blockChars + 1). */
  private readonly maxUnits: number;
  /** The text as UTF-16LE, grown to the longest text seen (at most maxUnits code units). */
  private buffer = Buffer.alloc(0);
  private units = new Uint16Array(0);
  private words = new Int32Array(0);

  constructor(
    readonly blockChars: number,
    readonly maxBlocks: number,
    seed: number,
  ) {
    this.his = new Int32Array(maxBlocks);
    this.los = new Int32Array(maxBlocks);
    this.ends = new Int32Array(maxBlocks);
    this.seedA = fmix32(seed ^ 0x5bd1e995);
    this.seedB = fmix32(Math.imul(seed, 0x27d4eb2f) ^ 0x165667b1);
    this.maxUnits = maxBlocks * (blockChars + 1);
  }

  /** Cuts `text` for `model` into the arrays (kept when they already hold this text and model). */
  cut(text: string, model: string | undefined): number {
    if (text === this.lastText && model === this.lastModel) return this.count;
    let a = this.seedA;
    let b = this.seedB;
    if (model !== undefined) {
      // The model's own root: its name hashed like a block (its length folded in).
      this.load(model, Math.min(model.length, MAX_MODEL_UNITS));
      this.mix(a, b ^ model.length, 0, Math.min(model.length, MAX_MODEL_UNITS));
      a = this.outA;
      b = this.outB;
    }
    const size = this.blockChars;
    const length = Math.min(text.length, this.maxUnits);
    this.load(text, length);
    const units = this.units;
    let start = 0;
    let count = 0;
    while (count < this.maxBlocks) {
      let end = start + size;
      if (end > length) break;
      if (end < length && isHigh(units[end - 1]!) && isLow(units[end]!)) end++;
      this.mix(a, b, start, end);
      a = this.outA;
      b = this.outB;
      // 21 bits of word A over the 32 of word B: a 53-bit key.
      this.his[count] = a >>> 11;
      this.los[count] = b;
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

  /** Copies the first `length` code units of `text` into the buffer. */
  private load(text: string, length: number): void {
    if (this.units.length < length) {
      let capacity = Math.max(1024, this.units.length);
      while (capacity < length) capacity *= 2;
      this.buffer = Buffer.alloc(capacity * 2);
      const { buffer, byteOffset } = this.buffer;
      this.units = new Uint16Array(buffer, byteOffset, capacity);
      this.words = new Int32Array(buffer, byteOffset, capacity >> 1);
    }
    this.buffer.write(text, 0, length * 2, "utf16le");
    // Our state (lastText) no longer describes the buffer.
    this.lastText = undefined;
  }

  private outA = 0;
  private outB = 0;

  /** Hashes code units [start, end) of the buffer from the parent words (a, b) into outA, outB. */
  private mix(a: number, b: number, start: number, end: number): void {
    let v1 = (a + PRIME1 + PRIME2) | 0;
    let v2 = (b + PRIME2) | 0;
    let v3 = a ^ b;
    let v4 = (b - PRIME1) | 0;
    let i = start;
    if ((start & 1) === 0) {
      // Aligned: two code units a word, little-endian (units[2w] is the low half of words[w]).
      const words = this.words;
      let w = start >> 1;
      const stop = end >> 1;
      for (; w + 3 < stop; w += 4) {
        v1 = round(v1, words[w]!);
        v2 = round(v2, words[w + 1]!);
        v3 = round(v3, words[w + 2]!);
        v4 = round(v4, words[w + 3]!);
      }
      if (w < stop) v1 = round(v1, words[w++]!);
      if (w < stop) v2 = round(v2, words[w++]!);
      if (w < stop) v3 = round(v3, words[w++]!);
      i = w << 1;
    } else {
      // A block after a lengthened one starts at an odd unit: pair the units by hand.
      const units = this.units;
      for (; i + 1 < end; i += 2) v1 = round(v1, units[i]! | (units[i + 1]! << 16));
    }
    // The odd last unit, marked so that it never equals a word's value.
    if (i < end) v4 = round(v4, this.units[i]! | 0x10000);
    const length = end - start;
    const merged =
      (((v1 << 1) | (v1 >>> 31)) +
        ((v2 << 7) | (v2 >>> 25)) +
        ((v3 << 12) | (v3 >>> 20)) +
        ((v4 << 18) | (v4 >>> 14)) +
        length) |
      0;
    this.outA = fmix32(merged);
    this.outB = fmix32(
      (Math.imul(v1 ^ ((v3 << 16) | (v3 >>> 16)), PRIME3) +
        Math.imul(v2 ^ ((v4 << 16) | (v4 >>> 16)), PRIME5)) ^
        Math.imul(length, PRIME4),
    );
  }
}

/** xxhash32's primes. */
const PRIME1 = 0x9e3779b1 | 0;
const PRIME2 = 0x85ebca77 | 0;
const PRIME3 = 0xc2b2ae3d | 0;
const PRIME4 = 0x27d4eb2f | 0;
const PRIME5 = 0x165667b1 | 0;

/** A model name longer than this is hashed by its start and its length (names are short). */
const MAX_MODEL_UNITS = 4096;

/** xxhash32's round: bijective in `word` for a given accumulator. */
function round(acc: number, word: number): number {
  const x = (acc + Math.imul(word, PRIME2)) | 0;
  return Math.imul((x << 13) | (x >>> 19), PRIME1);
}

function isHigh(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}

function isLow(code: number): boolean {
  return code >= 0xdc00 && code <= 0xdfff;
}
