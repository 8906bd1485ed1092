import { createHash } from "node:crypto";

/**
 * Granularity of a claimed prefix, in characters (about 32 tokens). A claim names the text up to
 * the second block boundary past the longest match, so two requests whose replicas saw slightly
 * different matches (a few characters) still name the same prefix, and a claim always covers
 * more than one block of text nobody holds yet.
 */
export const CLAIM_BLOCK_CHARS = 128;

/**
 * Where the prefix to claim ends, or -1 when the decision needs no claim: the index already
 * singles out one worker (its match is at least a block longer than any other candidate's, so
 * every replica that knows it decides alike), there is only one candidate, or the text has less
 * than about two blocks beyond what the fleet holds (too little to be worth a round trip).
 * `matched[i]` is candidate i's matched length; reads the first `count` entries.
 */
export function newPrefixClaimEnd(
  length: number,
  matched: readonly number[],
  count: number,
): number {
  if (count < 2) return -1;
  let first = 0;
  let second = 0;
  for (let i = 0; i < count; i++) {
    const m = matched[i] ?? 0;
    if (m > first) {
      second = first;
      first = m;
    } else if (m > second) {
      second = m;
    }
  }
  if (first - second >= CLAIM_BLOCK_CHARS) return -1;
  const end = (Math.floor(first / CLAIM_BLOCK_CHARS) + 2) * CLAIM_BLOCK_CHARS;
  return end <= length ? end : -1;
}

/** The claim's name: a digest of the model key and the text's first `end` characters. */
export function newPrefixClaimKey(model: string | undefined, text: string, end: number): string {
  return createHash("sha256")
    .update(model ?? "")
    .update("\0")
    .update(text.slice(0, end))
    .digest("base64url")
    .slice(0, 22);
}
