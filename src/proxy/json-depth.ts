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

/**
 * The nesting of JSON text read piece by piece, as a body arrives: each piece is scanned once, in
 * one pass, brackets inside strings skipped, the state (depth, inside a string, an escape cut at
 * the piece's end) carried to the next. Malformed text is left to JSON.parse.
 */
export class NestingScan {
  private depth = 0;
  private inString = false;
  /** A backslash in a string ended the last piece: the next byte is escaped. */
  private escaped = false;

  constructor(private readonly limit: number = MAX_BODY_NESTING) {}

  /** Scans the next piece; true once the text has opened more than `limit` arrays/objects at once. */
  push(bytes: Uint8Array): boolean {
    if (bytes.length === 0) return false;
    const { limit } = this;
    let { depth, inString } = this;
    let i = this.escaped ? 1 : 0;
    this.escaped = false;
    for (; i < bytes.length; i++) {
      const b = bytes[i]!;
      if (inString) {
        if (b === BACKSLASH) {
          if (++i === bytes.length) this.escaped = true;
        } else if (b === QUOTE) inString = false;
      } else if (b === QUOTE) inString = true;
      else if (b === OPEN_BRACKET || b === OPEN_BRACE) {
        if (++depth > limit) return true;
      } else if (b === CLOSE_BRACKET || b === CLOSE_BRACE) depth--;
    }
    this.depth = depth;
    this.inString = inString;
    return false;
  }
}

/** Whether the JSON text in `bytes` opens more than `limit` arrays/objects at once. */
export function textNestsDeeperThan(bytes: Uint8Array, limit: number = MAX_BODY_NESTING): boolean {
  return new NestingScan(limit).push(bytes);
}
