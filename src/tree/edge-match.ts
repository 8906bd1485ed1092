/**
 * How far a text follows an edge label, in whole code points: the comparison the radix tree's
 * match, insert and truncate (radix-tree.ts) and the shared index (index/shared-index.ts) make at
 * every edge, with the surrogate helpers and the flat copy (`ownCopy`) labels are stored as.
 * Child lookup is in child-container.ts.
 */

/** Chars of an edge compared one by one before comparing the whole label at once. */
const QUICK_CHARS = 8;
/** Divergence search: chars compared one by one before galloping with native string equality. */
const SCAN_CHARS = 16;
/** V8 copies substrings shorter than this; longer ones become sliced strings (see `ownCopy`). */
const MIN_SLICED_LENGTH = 13;

export function isHigh(code: number): boolean {
  return (code & 0xfc00) === 0xd800;
}

export function isLow(code: number): boolean {
  return (code & 0xfc00) === 0xdc00;
}

/**
 * The code point at `pos` (a lone surrogate is its own): what children are keyed by. Not
 * `String.prototype.codePointAt`: optimized by V8 in Node 24, it reads past the end of a sliced
 * string, so a text cut just after a high surrogate got the key of the pair its parent string
 * continued with, and missed its child.
 */
export function keyAt(text: string, pos: number): number {
  const code = text.charCodeAt(pos);
  if ((code & 0xfc00) !== 0xd800 || pos + 1 >= text.length) return code;
  const next = text.charCodeAt(pos + 1);
  return (next & 0xfc00) === 0xdc00 ? ((code - 0xd800) << 10) + (next - 0xdc00) + 0x10000 : code;
}

/**
 * A flat copy of `s` that holds no reference to the string it was cut from. `slice` of a long
 * string makes a V8 sliced string that keeps the whole parent (e.g. an entire request body) alive;
 * `join` builds a fresh sequential string of exactly the right length. Measured the cheapest flat
 * copy (~0.3 µs for 8k chars, against 2-16 µs for Buffer or JSON round trips).
 */
export function ownCopy(s: string): string {
  return s.length < MIN_SLICED_LENGTH ? s : [s.slice(0, 1), s.slice(1)].join("");
}

/**
 * Length of the common prefix of `a` from `ai` and `b` from 0, looking at most `max` code units,
 * the first `from` of which are known to be equal. A short char scan handles the usual early
 * divergence; past it, blocks are compared with native string equality (memcmp speed, where a JS
 * char loop costs ~2 ns a char) while galloping, then bisected down to the differing char.
 */
function commonLength(a: string, ai: number, b: string, max: number, from: number): number {
  let i = from;
  const scan = Math.min(max, SCAN_CHARS);
  while (i < scan) {
    if (a.charCodeAt(ai + i) !== b.charCodeAt(i)) return i;
    i++;
  }
  let step = SCAN_CHARS;
  while (i + step <= max && a.slice(ai + i, ai + i + step) === b.slice(i, i + step)) {
    i += step;
    step *= 2;
  }
  let hi = Math.min(i + step, max);
  while (hi - i > SCAN_CHARS) {
    const mid = (i + hi) >>> 1;
    if (a.slice(ai + i, ai + mid) === b.slice(i, mid)) i = mid;
    else hi = mid;
  }
  while (i < hi && a.charCodeAt(ai + i) === b.charCodeAt(i)) i++;
  return i;
}

/**
 * How many code units of `label` the text at `pos` shares, in whole code points: the raw common
 * length, one less when that would end between a high surrogate and a low surrogate in either
 * string. The tree never lets a child start with a low surrogate that pairs with the end of its
 * parent's label, so a label's end counts as "not followed by a low surrogate".
 */
export function edgeMatch(text: string, pos: number, label: string): number {
  const len = label.length;
  const rest = text.length - pos;
  const max = Math.min(len, rest);
  // A few chars one by one first: an edge that diverges usually does so at once, and then the
  // whole-label comparison below (a string allocation and a runtime call) is not worth making.
  const scan = Math.min(max, QUICK_CHARS);
  let k = 0;
  while (k < scan && text.charCodeAt(pos + k) === label.charCodeAt(k)) k++;
  if (k === scan) {
    if (max === len && (len === scan || text.slice(pos, pos + len) === label)) k = len;
    else k = commonLength(text, pos, label, max, k);
  }
  if (
    k > 0 &&
    isHigh(label.charCodeAt(k - 1)) &&
    ((k < len && isLow(label.charCodeAt(k))) || (k < rest && isLow(text.charCodeAt(pos + k))))
  ) {
    k--;
  }
  return k;
}
