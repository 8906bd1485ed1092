/**
 * Naive reference for RadixTree: the strings themselves, compared one by one. Slow and obviously
 * right; the property tests hold the optimized tree to it.
 */

export function isHigh(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}

export function isLow(code: number): boolean {
  return code >= 0xdc00 && code <= 0xdfff;
}

/**
 * Common prefix of t and s in code units, counted in whole code points: one less when the raw
 * common prefix ends on a high surrogate that is paired with a low surrogate in either string
 * (a lone surrogate is its own code point).
 */
export function codePointPrefix(t: string, s: string): number {
  const max = Math.min(t.length, s.length);
  let n = 0;
  while (n < max && t.charCodeAt(n) === s.charCodeAt(n)) n++;
  if (
    n > 0 &&
    isHigh(t.charCodeAt(n - 1)) &&
    ((n < t.length && isLow(t.charCodeAt(n))) || (n < s.length && isLow(s.charCodeAt(n))))
  ) {
    n--;
  }
  return n;
}

/** The longest code-point prefix `text` shares with any of `strings`. */
export function modelMatch(strings: Iterable<string>, text: string): number {
  let best = 0;
  for (const s of strings) best = Math.max(best, codePointPrefix(text, s));
  return best;
}

/**
 * Characters a tree holding exactly `strings` must hold: one per code unit of each distinct
 * non-empty code-point prefix's last code point (the tree is a trie over code points, so 😀 and 😁,
 * which share a high surrogate, are two separate two-unit edges).
 */
export function modelChars(strings: Iterable<string>): number {
  const prefixes = new Map<string, number>();
  for (const s of strings) {
    let end = 0;
    for (const codePoint of s) {
      end += codePoint.length;
      prefixes.set(s.slice(0, end), codePoint.length);
    }
  }
  let chars = 0;
  for (const units of prefixes.values()) chars += units;
  return chars;
}

/** True when `count` would cut `text` between a high surrogate and its low surrogate. */
export function splitsPair(text: string, count: number): boolean {
  return (
    count > 0 &&
    count < text.length &&
    isHigh(text.charCodeAt(count - 1)) &&
    isLow(text.charCodeAt(count))
  );
}
