/**
 * Engine block hashes packed in typed arrays: what the KV-event decoder produces and the precise
 * index keys its blocks by. A batch of 330k blocks decoded into 330k BigInts and 330k strings kept
 * V8's young generation full of survivors across the turns its sliced decode and apply took; each
 * scavenge copied them all and held the event loop for hundreds of milliseconds. Typed arrays are
 * neither scanned nor copied by the GC.
 *
 * An int hash (vLLM's ExternalBlockHash `int`, masked to 64 bits in
 * vllm/v1/core/kv_cache_utils.py `maybe_convert_block_hash`; SGLang's signed 64-bit ints) is held
 * exactly as its 64 bits and sign. Anything else (vLLM's `bytes` hashes, as "x" + hex, or any
 * other string an EngineHash holds) is held as its text, with a 64-bit seeded fingerprint for the
 * tables. The packed form and the string form (block-events.ts EngineHash: an int's decimal, bytes
 * "x" + hex) convert both ways without loss, so two hashes are equal in one form exactly when
 * they are equal in the other.
 */
import { fmix32 } from "../hash/fmix32.js";

/**
 * An engine's block hash in its string form: vLLM's ExternalBlockHash is `bytes | int` (SGLang's
 * is int), and a 64-bit int does not fit a JS number. Ints are their decimal form, bytes "x" +
 * lowercase hex, so the two can never collide. Events carry them packed (HashList) as decoded.
 */
export type EngineHash = string;

/** A non-negative int: hi/lo are its 64 bits. */
export const HASH_UINT = 0;
/** A negative int: hi/lo are its two's complement (so -1 is not 2^64 - 1). */
export const HASH_NEGATIVE = 1;
/** A text (bytes as "x" + hex, or any other string): hi/lo are its fingerprint. */
export const HASH_TEXT = 2;

const TWO_32 = 2 ** 32;
/** Per process, so that nobody outside can choose texts whose fingerprints collide. */
const SEED_HI = (Math.random() * TWO_32) >>> 0;
const SEED_LO = (Math.random() * TWO_32) >>> 0;
/** Canonical decimal of an int: what EngineHash holds for one. */
const DECIMAL = /^(?:0|-?[1-9][0-9]{0,19})$/;
const MIN_INT64 = -(2n ** 63n);
const MAX_UINT64 = 2n ** 64n - 1n;

/**
 * A list of engine hashes: hash i is at `start + i` of the arrays, which the decoder shares among
 * every event of a batch (an event's list is one small object, not three typed arrays). `kinds`
 * says how `his`/`los` (and `texts`) read.
 */
export class HashList {
  constructor(
    readonly kinds: Uint8Array,
    readonly his: Uint32Array,
    readonly los: Uint32Array,
    /** Only when some hash is a text: the text of each such hash (undefined for ints). */
    readonly texts: readonly (string | undefined)[] | undefined,
    readonly start: number,
    readonly length: number,
  ) {}

  /** Hashes [from, to) of this list, over the same arrays. */
  slice(from: number, to: number): HashList {
    const end = Math.min(Math.max(to, from), this.length);
    return new HashList(this.kinds, this.his, this.los, this.texts, this.start + from, end - from);
  }

  /** Hash i in its string form (one at a time: a parent, a log line; never a whole batch). */
  at(i: number): EngineHash {
    const at = this.start + i;
    const kind = this.kinds[at]!;
    if (kind === HASH_TEXT) return this.texts![at]!;
    const bits = (BigInt(this.his[at]!) << 32n) | BigInt(this.los[at]!);
    return (kind === HASH_NEGATIVE ? bits - 2n ** 64n : bits).toString();
  }

  /** Every hash in its string form (tests, and callers that hold a few). */
  toStrings(): EngineHash[] {
    return Array.from({ length: this.length }, (_, i) => this.at(i));
  }

  /** The packed form of hashes in their string form. */
  static from(hashes: readonly EngineHash[]): HashList {
    const out = new HashListBuilder(hashes.length);
    out.reserve(hashes.length);
    for (let i = 0; i < hashes.length; i++) out.setString(i, hashes[i]!);
    return out.list(0, hashes.length);
  }
}

/** Blocks' hashes in either form, as events carry them. */
export type EngineHashes = readonly EngineHash[] | HashList;

/** The packed form of an event's hashes (a no-op for packed ones). */
export function packed(hashes: EngineHashes): HashList {
  return hashes instanceof HashList ? hashes : HashList.from(hashes);
}

/**
 * Fills arrays with hashes, one at a time, growing them as needed (`reserve`); lists are views of
 * them. A list made before a growth keeps the arrays it was made over, which hold its hashes.
 */
export class HashListBuilder {
  kinds: Uint8Array;
  his: Uint32Array;
  los: Uint32Array;
  private texts: (string | undefined)[] | undefined;
  private used = 0;

  constructor(capacity: number) {
    this.kinds = new Uint8Array(capacity);
    this.his = new Uint32Array(capacity);
    this.los = new Uint32Array(capacity);
  }

  /** Room for n more hashes; the index of the first. */
  reserve(n: number): number {
    const start = this.used;
    const end = start + n;
    if (end > this.kinds.length) {
      const size = Math.max(end, this.kinds.length * 2, 64);
      const kinds = new Uint8Array(size);
      const his = new Uint32Array(size);
      const los = new Uint32Array(size);
      kinds.set(this.kinds.subarray(0, start));
      his.set(this.his.subarray(0, start));
      los.set(this.los.subarray(0, start));
      this.kinds = kinds;
      this.his = his;
      this.los = los;
    }
    this.used = end;
    return start;
  }

  /** An int given as its high and low 32 bits (two's complement when negative). */
  setInt(i: number, negative: boolean, hi: number, lo: number): void {
    this.kinds[i] = negative ? HASH_NEGATIVE : HASH_UINT;
    this.his[i] = hi;
    this.los[i] = lo;
  }

  /** An int that is a JS number (a safe integer: its magnitude's high word is exact). */
  setNumber(i: number, value: number): void {
    const magnitude = Math.abs(value);
    const lo = magnitude >>> 0;
    const hi = Math.floor(magnitude / TWO_32);
    if (value >= 0) {
      this.setInt(i, false, hi, lo);
      return;
    }
    // Two's complement: invert both words and add one, carrying into the high word.
    this.setInt(i, true, (~hi + (lo === 0 ? 1 : 0)) >>> 0, (~lo + 1) >>> 0);
  }

  setText(i: number, text: string): void {
    this.texts ??= [];
    this.texts[i] = text;
    this.kinds[i] = HASH_TEXT;
    this.his[i] = fingerprint(text, SEED_HI);
    this.los[i] = fingerprint(text, SEED_LO);
  }

  /** A hash in its string form: a canonical 64-bit int's decimal is held as that int. */
  setString(i: number, hash: EngineHash): void {
    if (DECIMAL.test(hash)) {
      const value = BigInt(hash);
      if (value >= MIN_INT64 && value <= MAX_UINT64) {
        const bits = value < 0n ? value + 2n ** 64n : value;
        this.setInt(i, value < 0n, Number(bits >> 32n), Number(bits & 0xffffffffn));
        return;
      }
    }
    this.setText(i, hash);
  }

  /** Hashes [start, start + length) as a list (the arrays are shared, not copied). */
  list(start: number, length: number): HashList {
    return new HashList(this.kinds, this.his, this.los, this.texts, start, length);
  }
}

/** 32 bits of a seeded hash of a text's UTF-16 units. */
function fingerprint(text: string, seed: number): number {
  let h = seed;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return fmix32(h ^ text.length);
}
