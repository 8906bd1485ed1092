/**
 * The deepest array/object nesting of a parsed JSON value, measured without recursion: V8 parses
 * any depth iteratively, but JSON.stringify recurses and throws a RangeError (a 500) on a value
 * nested some thousands deep. Whatever serializes a client's value again checks it first.
 */
export const MAX_NESTING_DEPTH = 128;

/** Whether `value` nests deeper than `limit` levels (a scalar is 0, `[]` or `{}` is 1). */
export function nestsDeeperThan(value: unknown, limit: number = MAX_NESTING_DEPTH): boolean {
  const stack: Array<{ value: unknown; depth: number }> = [{ value, depth: 1 }];
  while (stack.length > 0) {
    const { value: v, depth } = stack.pop() as { value: unknown; depth: number };
    if (v === null || typeof v !== "object") continue;
    if (depth > limit) return true;
    const children = Array.isArray(v) ? v : Object.values(v);
    for (const child of children) {
      if (child !== null && typeof child === "object")
        stack.push({ value: child, depth: depth + 1 });
    }
  }
  return false;
}

/**
 * Nesting a request body may have at all, checked on its bytes as they arrive (intake/read-body.ts),
 * before anything parses them: V8 parses a body nested 100k deep in about 100 ms, on the event
 * loop for a body under --parse-offload-bytes, and the engines refuse such a body anyway. Both
 * serve their OpenAI routes through FastAPI, which reads the whole body and then json.loads it
 * (fastapi/routing.py, get_request_handler): CPython's decoder raises RecursionError past its
 * recursion limit (1,000), answered 400 "There was an error parsing the body"; orjson limits
 * recursion too since 3.9.15 (CVE-2024-27454).
 */
export const MAX_BODY_NESTING = 1000;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACKET = 0x5b;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACKET = 0x5d;
const CLOSE_BRACE = 0x7d;
const COMMA = 0x2c;
const LETTER_U = 0x75;

/** Bytes read by hand inside a string before a native search: most strings are short. */
const BY_HAND = 16;

/** A key longer than this many raw bytes is none of the bounded fields (no field name is long). */
const MAX_KEY_BYTES = 64;

const find: (bytes: Uint8Array, byte: number, from: number) => number = (bytes, byte, from) =>
  Buffer.prototype.indexOf.call(bytes, byte, from);

/**
 * The nesting of JSON text read piece by piece, as a body arrives: each piece is scanned once, in
 * one pass, brackets inside strings skipped, the state (depth, inside a string, an escape cut at
 * the piece's end) carried to the next. Malformed text is left to JSON.parse.
 *
 * In the same pass it bounds the strings of chosen top-level fields (`fieldChars`: field -> most
 * characters): the field's value when it is a string, or the strings of its list. A client naming
 * a 5 MB adapter is refused at the bytes that prove it, before the rest is kept or parsed. Lengths
 * are counted as JSON.parse would give them (UTF-16 units, an escape one), so the parse's own check
 * of the field agrees; keys spelled with escapes are decoded first.
 *
 * Long strings are skipped by a native search for the next quote or backslash (memchr: a 5 MB
 * prompt in about 0.3 ms, against 8 ms byte by byte); a few bytes are read by hand first, so a
 * string of escapes costs no more than the plain byte loop.
 */
export class NestingScan {
  private depth = 0;
  private inString = false;
  /** A backslash in a string ended the last piece: the next byte is escaped. */
  private escaped = false;
  /** The text is an object: strings at depth 1 alternate key and value. */
  private topObject = false;
  /** At depth 1 of the top object, the next string is a key. */
  private expectKey = false;
  /** The string read now is a top-level key: its raw bytes so far (undefined: not a key). */
  private key: number[] | undefined;
  /** The current top-level value's field, when bounded, and its bound. */
  private field: string | undefined;
  private fieldMax = 0;
  /** That value is a list: the strings of its items are bounded too. */
  private fieldList = false;
  /** The string read now is bounded: its length so far (-1: not bounded). */
  private counted = -1;
  /** Hex digits of a \uXXXX escape still to come in a bounded string. */
  private hexLeft = 0;
  /** The field and the length its string reached, once one passed its bound. */
  overlong: { field: string; chars: number } | undefined;

  constructor(
    private readonly limit: number = MAX_BODY_NESTING,
    private readonly fieldChars?: ReadonlyMap<string, number>,
  ) {}

  /**
   * Scans the next piece; true once the text is to be refused: it has opened more than `limit`
   * arrays/objects at once, or a bounded field's string is too long (`overlong` says which).
   */
  push(bytes: Uint8Array): boolean {
    const n = bytes.length;
    let i = 0;
    while (i < n) {
      if (this.inString) {
        if (this.key !== undefined) i = this.readKey(bytes, i);
        else if (this.counted >= 0) {
          i = this.readBounded(bytes, i);
          if (this.overlong !== undefined) return true;
        } else i = this.skipString(bytes, i);
        continue;
      }
      const b = bytes[i++] as number;
      if (b === QUOTE) this.openString();
      else if (b === OPEN_BRACKET || b === OPEN_BRACE) {
        if (++this.depth > this.limit) return true;
        if (this.depth === 1) {
          this.topObject = b === OPEN_BRACE;
          this.expectKey = this.topObject;
        } else if (this.depth === 2 && this.field !== undefined) {
          this.fieldList = b === OPEN_BRACKET;
        }
      } else if (b === CLOSE_BRACKET || b === CLOSE_BRACE) {
        if (--this.depth === 1) this.fieldList = false;
      } else if (b === COMMA && this.depth === 1 && this.topObject) {
        this.expectKey = true;
        this.field = undefined;
      }
    }
    return false;
  }

  private openString(): void {
    this.inString = true;
    if (this.fieldChars === undefined || !this.topObject) return;
    if (this.depth === 1 && this.expectKey) {
      this.key = [];
      this.expectKey = false;
    } else if (
      this.field !== undefined &&
      (this.depth === 1 || (this.depth === 2 && this.fieldList))
    ) {
      this.counted = 0;
      this.hexLeft = 0;
    }
  }

  /** Skips string bytes from `i`; returns where the scan goes on. */
  private skipString(bytes: Uint8Array, i: number): number {
    const n = bytes.length;
    if (this.escaped) {
      this.escaped = false;
      i++;
    }
    let quote = -1;
    let backslash = -1;
    while (i < n) {
      const byHand = Math.min(n, i + BY_HAND);
      for (; i < byHand; i++) {
        const b = bytes[i];
        if (b === QUOTE) {
          this.inString = false;
          return i + 1;
        }
        if (b === BACKSLASH && ++i === n) {
          this.escaped = true;
          return n;
        }
      }
      if (i >= n) return n;
      // Each position found holds until the scan passes it.
      if (quote < i) quote = find(bytes, QUOTE, i);
      if (quote < 0) quote = n;
      if (backslash < i) backslash = find(bytes, BACKSLASH, i);
      if (backslash < 0) backslash = n;
      if (quote < backslash) {
        this.inString = false;
        return quote + 1;
      }
      if (backslash === n) return n;
      i = backslash + 1;
      if (i === n) {
        this.escaped = true;
        return n;
      }
      i++;
    }
    return n;
  }

  /** Reads a top-level key's bytes; at its end, whether its value is bounded. */
  private readKey(bytes: Uint8Array, i: number): number {
    const key = this.key as number[];
    const n = bytes.length;
    for (; i < n; i++) {
      const b = bytes[i] as number;
      if (this.escaped) this.escaped = false;
      else if (b === BACKSLASH) this.escaped = true;
      else if (b === QUOTE) {
        this.inString = false;
        this.key = undefined;
        this.keyEnded(key);
        return i + 1;
      }
      if (key.length <= MAX_KEY_BYTES) key.push(b);
    }
    return n;
  }

  private keyEnded(raw: number[]): void {
    this.field = undefined;
    this.fieldList = false;
    if (raw.length > MAX_KEY_BYTES) return;
    let name = Buffer.from(raw).toString("latin1");
    if (raw.includes(BACKSLASH)) {
      try {
        name = JSON.parse(`"${Buffer.from(raw).toString("utf8")}"`) as string;
      } catch {
        return; // malformed: JSON.parse refuses the body anyway
      }
    }
    const max = this.fieldChars?.get(name);
    if (max === undefined) return;
    this.field = name;
    this.fieldMax = max;
  }

  /** Reads a bounded string, counting its characters as JSON.parse would. */
  private readBounded(bytes: Uint8Array, i: number): number {
    const n = bytes.length;
    let chars = this.counted;
    for (; i < n; i++) {
      const b = bytes[i] as number;
      if (this.hexLeft > 0) this.hexLeft--;
      else if (this.escaped) {
        this.escaped = false;
        chars++;
        if (b === LETTER_U) this.hexLeft = 4;
      } else if (b === BACKSLASH) this.escaped = true;
      else if (b === QUOTE) {
        this.inString = false;
        this.counted = -1;
        return i + 1;
      }
      // UTF-8: a lead byte starts a character, four bytes long it is two UTF-16 units.
      else if ((b & 0xc0) !== 0x80) chars += b >= 0xf0 ? 2 : 1;
      if (chars > this.fieldMax) {
        this.overlong = { field: this.field as string, chars };
        return n;
      }
    }
    this.counted = chars;
    return n;
  }
}

/** Whether the JSON text in `bytes` opens more than `limit` arrays/objects at once. */
export function textNestsDeeperThan(bytes: Uint8Array, limit: number = MAX_BODY_NESTING): boolean {
  return new NestingScan(limit).push(bytes);
}
