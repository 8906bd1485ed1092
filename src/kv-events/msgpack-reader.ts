/**
 * A msgpack reader for KV-event payloads (the format: https://github.com/msgpack/msgpack/blob/master/spec.md),
 * read one value at a time from the bytes, so that decode.ts can take a batch apart field by field:
 * block hashes go straight into typed arrays (hash-list.ts) instead of a BigInt and a string each,
 * and the work yields every ITEMS_PER_TURN values so that one batch never holds the event loop.
 *
 * Bounded as the generic decoder it replaces was: strings up to 64 KiB, bytes up to 1 KiB, maps
 * up to 64 entries, no extension types; an array may not claim more elements than bytes remain,
 * and nesting is at most MAX_DEPTH deep. Anything else throws KvDecodeError. Ints of the 64-bit
 * formats read as BigInt, the rest as numbers (what the engines' msgspec writes round-trips).
 */
import { KvDecodeError } from "./decode-error.js";

/** Values read between two turns of the event loop. */
export const ITEMS_PER_TURN = 8192;
const MAX_STR = 1 << 16;
const MAX_BIN = 1 << 10;
const MAX_MAP = 64;
const MAX_ARRAY = 1 << 22;
/** A KV-event batch nests five deep (batch, events, event, extra_keys, entry, item). */
const MAX_DEPTH = 32;

const utf8 = new TextDecoder("utf-8");

/** An array or map being filled while reading a nested value. */
interface Frame {
  readonly array: unknown[] | undefined;
  readonly map: Record<string, unknown> | undefined;
  remaining: number;
  key: string | undefined;
}

export class MsgpackReader {
  pos = 0;
  /** Values read so far: a yield is due at every multiple of ITEMS_PER_TURN. */
  private items = 0;
  private readonly view: DataView;

  constructor(readonly bytes: Uint8Array) {
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  get done(): boolean {
    return this.pos >= this.bytes.length;
  }

  /** Counts one value read; true when the caller should give the event loop a turn. */
  tick(): boolean {
    return ++this.items % ITEMS_PER_TURN === 0;
  }

  /** The next byte, not consumed. */
  peek(): number {
    if (this.pos >= this.bytes.length) throw new KvDecodeError("message ends early");
    return this.bytes[this.pos]!;
  }

  /** The length of the array that comes next, its header consumed; undefined when not an array. */
  arrayLength(): number | undefined {
    const b = this.peek();
    let n: number;
    if (b >= 0x90 && b <= 0x9f) {
      this.pos++;
      n = b & 0x0f;
    } else if (b === 0xdc) {
      n = this.view.getUint16(this.skip(3) + 1);
    } else if (b === 0xdd) {
      n = this.view.getUint32(this.skip(5) + 1);
    } else {
      return undefined;
    }
    // Every element takes at least a byte: a header claiming more is malformed.
    if (n > MAX_ARRAY || n > this.bytes.length - this.pos)
      throw new KvDecodeError(`array of ${n} in too few bytes`);
    return n;
  }

  /** The entry count of the map that comes next, its header consumed; undefined when not a map. */
  mapLength(): number | undefined {
    const b = this.peek();
    let n: number;
    if (b >= 0x80 && b <= 0x8f) {
      this.pos++;
      n = b & 0x0f;
    } else if (b === 0xde) {
      n = this.view.getUint16(this.skip(3) + 1);
    } else if (b === 0xdf) {
      n = this.view.getUint32(this.skip(5) + 1);
    } else {
      return undefined;
    }
    if (n > MAX_MAP) throw new KvDecodeError(`map of ${n} entries`);
    return n;
  }

  /** A map key: a string (or a number, as its decimal). */
  key(): string {
    const b = this.peek();
    if ((b >= 0xa0 && b <= 0xbf) || (b >= 0xd9 && b <= 0xdb)) return this.scalar() as string;
    const value = this.scalar();
    if (typeof value === "number" || typeof value === "bigint") return String(value);
    throw new KvDecodeError("map key is neither a string nor a number");
  }

  /**
   * One whole value: scalars as JS values, arrays as arrays, maps as objects. Iterative, so depth
   * costs no stack; it yields where a turn of the event loop is due.
   */
  *value(depth = 0): Generator<void, unknown> {
    const stack: Frame[] = [];
    for (;;) {
      if (this.tick()) yield;
      let value: unknown;
      const arrayLength = this.arrayLength();
      const mapLength = arrayLength === undefined ? this.mapLength() : undefined;
      if (arrayLength !== undefined || mapLength !== undefined) {
        if (depth + stack.length >= MAX_DEPTH) throw new KvDecodeError("nested too deep");
        const frame: Frame =
          arrayLength !== undefined
            ? {
                array: new Array<unknown>(arrayLength),
                map: undefined,
                remaining: arrayLength,
                key: undefined,
              }
            : { array: undefined, map: {}, remaining: mapLength!, key: undefined };
        if (frame.remaining > 0) {
          stack.push(frame);
          if (frame.map !== undefined) frame.key = this.checkedKey();
          continue;
        }
        value = frame.array ?? frame.map;
      } else {
        value = this.scalar();
      }
      // Put the value in its container; close every container it completes.
      for (;;) {
        const top = stack.at(-1);
        if (top === undefined) return value;
        if (top.array !== undefined) top.array[top.array.length - top.remaining] = value;
        else top.map![top.key!] = value;
        top.remaining--;
        if (top.remaining > 0) {
          if (top.map !== undefined) top.key = this.checkedKey();
          break;
        }
        stack.pop();
        value = top.array ?? top.map;
      }
    }
  }

  private checkedKey(): string {
    const key = this.key();
    if (key === "__proto__") throw new KvDecodeError("map key __proto__");
    return key;
  }

  /**
   * The int that comes next, written to `out` as its sign and 64 bits; false (nothing consumed)
   * when the next value is not an int.
   */
  int(out: Int64): boolean {
    const b = this.peek();
    if (b <= 0x7f || b >= 0xe0) {
      this.pos++;
      return b <= 0x7f ? setInt(out, false, 0, b) : this.small(out, b - 0x100);
    }
    const at = this.pos + 1;
    switch (b) {
      case 0xcc:
        this.skip(2);
        return setInt(out, false, 0, this.view.getUint8(at));
      case 0xcd:
        this.skip(3);
        return setInt(out, false, 0, this.view.getUint16(at));
      case 0xce:
        this.skip(5);
        return setInt(out, false, 0, this.view.getUint32(at));
      case 0xcf:
        this.skip(9);
        return setInt(out, false, this.view.getUint32(at), this.view.getUint32(at + 4));
      case 0xd0:
        this.skip(2);
        return this.small(out, this.view.getInt8(at));
      case 0xd1:
        this.skip(3);
        return this.small(out, this.view.getInt16(at));
      case 0xd2:
        this.skip(5);
        return this.small(out, this.view.getInt32(at));
      case 0xd3: {
        this.skip(9);
        const hi = this.view.getInt32(at);
        return setInt(out, hi < 0, hi >>> 0, this.view.getUint32(at + 4));
      }
      default:
        return false;
    }
  }

  /** A 32-bit signed int as sign and 64 bits. */
  private small(out: Int64, value: number): boolean {
    return value < 0 ? setInt(out, true, 0xffffffff, value >>> 0) : setInt(out, false, 0, value);
  }

  /** One scalar: nil, bool, number, bigint, string or bytes. */
  scalar(): unknown {
    const b = this.peek();
    if (b >= 0xa0 && b <= 0xbf) return this.str(1, b & 0x1f);
    if (this.int(scalarInt)) {
      const { negative, hi, lo } = scalarInt;
      // The 64-bit formats read as BigInt (what the engines' msgspec writes round-trips).
      if (b === 0xcf || b === 0xd3) {
        const bits = (BigInt(hi) << 32n) | BigInt(lo);
        return negative ? bits - 2n ** 64n : bits;
      }
      return negative ? lo | 0 : lo;
    }
    const at = this.pos + 1;
    switch (b) {
      case 0xc0:
        this.pos++;
        return null;
      case 0xc2:
        this.pos++;
        return false;
      case 0xc3:
        this.pos++;
        return true;
      case 0xc4:
        return this.bin(2, this.need(at, 1) && this.view.getUint8(at));
      case 0xc5:
        return this.bin(3, this.need(at, 2) && this.view.getUint16(at));
      case 0xc6:
        return this.bin(5, this.need(at, 4) && this.view.getUint32(at));
      case 0xca:
        this.skip(5);
        return this.view.getFloat32(at);
      case 0xcb:
        this.skip(9);
        return this.view.getFloat64(at);
      case 0xd9:
        return this.str(2, this.need(at, 1) && this.view.getUint8(at));
      case 0xda:
        return this.str(3, this.need(at, 2) && this.view.getUint16(at));
      case 0xdb:
        return this.str(5, this.need(at, 4) && this.view.getUint32(at));
      default:
        // Arrays and maps are read by value(); 0xc1 is never used; extension types are refused.
        throw new KvDecodeError(`unexpected msgpack byte 0x${b.toString(16)}`);
    }
  }

  /** Bytes [pos + header, + length) as a string. */
  private str(header: number, length: number): string {
    if (length > MAX_STR) throw new KvDecodeError(`string of ${length} bytes`);
    const from = this.skip(header + length) + header;
    const bytes = this.bytes;
    // Tags and field names are short ASCII: no decoder call for them.
    if (length <= 32) {
      let ascii = "";
      for (let i = from; i < from + length; i++) {
        const c = bytes[i]!;
        if (c >= 0x80) return utf8.decode(bytes.subarray(from, from + length));
        ascii += String.fromCharCode(c);
      }
      return ascii;
    }
    return utf8.decode(bytes.subarray(from, from + length));
  }

  private bin(header: number, length: number): Uint8Array {
    if (length > MAX_BIN) throw new KvDecodeError(`bytes of ${length}`);
    const from = this.skip(header + length) + header;
    return this.bytes.subarray(from, from + length);
  }

  /** True when `n` bytes from `at` are there; throws otherwise. */
  private need(at: number, n: number): true {
    if (at + n > this.bytes.length) throw new KvDecodeError("message ends early");
    return true;
  }

  /** Consumes n bytes (the one at pos first); returns where they started. */
  private skip(n: number): number {
    const at = this.pos;
    if (at + n > this.bytes.length) throw new KvDecodeError("message ends early");
    this.pos = at + n;
    return at;
  }
}

/** An int as its sign and 64 bits (two's complement when negative). */
export interface Int64 {
  negative: boolean;
  hi: number;
  lo: number;
}

/** Scratch for scalar(): reading is synchronous. */
const scalarInt: Int64 = { negative: false, hi: 0, lo: 0 };

function setInt(out: Int64, negative: boolean, hi: number, lo: number): true {
  out.negative = negative;
  out.hi = hi;
  out.lo = lo;
  return true;
}
