import fc from "fast-check";

/**
 * fast-check arbitraries for the strings the prefix trees are tested with, shared by the tree's
 * property tests and the PrefixIndex conformance suite so both probe the same hard cases.
 *
 * Pieces strings are built from: a tiny ASCII alphabet (lots of shared prefixes), CJK, emoji whose
 * surrogate pairs share a high surrogate (😀 😁 are D83D DE00 / D83D DE01), combining marks, lone
 * surrogates, and long runs that exercise the galloping comparison.
 */
export const PIECES = [
  "a",
  "b",
  "ab",
  " ",
  "中",
  "文",
  "字",
  "😀",
  "😁",
  "🎉",
  "e\u0301",
  "\u0301",
  "\uD83D",
  "\uDE00",
  "x".repeat(40),
  "lorem ipsum dolor sit amet, ".repeat(3),
];

export const piece = fc.constantFrom(...PIECES);
export const tail = fc.array(piece, { maxLength: 6 }).map((parts) => parts.join(""));

/** A pool of shared prefixes per run, so that generated strings really do share long prefixes. */
export const scenario = <T>(arb: (prefixes: string[]) => fc.Arbitrary<T>) =>
  fc.array(tail, { minLength: 1, maxLength: 4 }).chain(arb);

/**
 * One of the run's prefixes (or none) followed by a tail, half the time held the way V8 holds a
 * cut of a longer string: a sliced string whose parent goes on with another piece (a request body
 * cut into a prompt is one). Optimized string builtins have read past such a string's end.
 */
export function text(prefixes: string[]): fc.Arbitrary<string> {
  return fc
    .tuple(fc.nat({ max: prefixes.length }), tail, fc.option(piece, { freq: 2 }))
    .map(([i, rest, after]) => {
      const t = (i < prefixes.length ? prefixes[i] : "") + rest;
      return after === null ? t : cutOf(t, after);
    });
}

/** `t`, as a cut of `t + after` (a V8 sliced string from 13 chars on). */
export function cutOf(t: string, after: string): string {
  return `${t}${after}`.slice(0, t.length);
}

/** A query derived from an earlier insert (the `index`-th, modulo): a cut of it, plus a piece. */
export const seenQuery = fc.record({
  index: fc.nat(),
  cut: fc.nat({ max: 200 }),
  extra: fc.oneof(piece, fc.constant("")),
});
