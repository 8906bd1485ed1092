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

/** Longest text a claim describes (its ladder stops there). */
const LADDER_MAX_CHARS = 1 << 20;

/** The ladder's lengths below `length`: 128, 192, 256, 384, ... (two steps per doubling). */
function ladderLengths(length: number): number[] {
  const lengths: number[] = [];
  for (let step = CLAIM_BLOCK_CHARS; step < LADDER_MAX_CHARS; step *= 2) {
    for (const at of [step, step + step / 2]) if (at < length) lengths.push(at);
  }
  return lengths;
}

/** Short digests of text[0, at) for each `at` (ascending), in one pass over the text. */
function prefixDigests(text: string, lengths: readonly number[]): string[] {
  const hash = createHash("sha256");
  const out: string[] = [];
  let from = 0;
  for (const at of lengths) {
    hash.update(text.slice(from, at));
    from = at;
    out.push(hash.copy().digest("base64url").slice(0, 8));
  }
  return out;
}

/**
 * What a claim stores: the worker, the prefill the claimer's decision queued there (the text's
 * characters it did not hold), and a ladder of digests of the text's prefixes, so that a replica
 * that follows the claim can tell how much of its own text the claimer's shares (a tenant's
 * requests share the tools and the tenant prompt, not the question) and what the claimer's
 * request adds to that worker's queue: its policy then weighs both as one router would weigh a
 * decision it had just taken, rather than a guess. `<worker>|<queued>|<len>:<digest>,...`.
 */
export function newPrefixClaimValue(workerId: string, queued: number, text: string): string {
  const lengths = ladderLengths(Math.min(text.length, LADDER_MAX_CHARS) + 1);
  const digests = prefixDigests(text, lengths);
  const q = Number.isSafeInteger(queued) && queued > 0 ? queued : 0;
  return `${workerId}|${q}|${lengths.map((at, i) => `${at}:${digests[i]}`).join(",")}`;
}

/** A claim as the follower reads it (readNewPrefixClaim). */
export interface ReadClaim {
  /** The claimer's worker. */
  readonly worker: string;
  /** Characters this request's text shares with the claimer's (a lower bound). */
  readonly shared: number;
  /** The prefill the claimer's decision queued on that worker (0 when its value did not say). */
  readonly queued: number;
}

/**
 * A claim's value read against this request's text: the claimer's worker and the longest ladder
 * length at which both texts agree (a lower bound of what they share, at least `end` when the
 * claim was found under the same key), and what the claimer queued there. Undefined for a value
 * this version cannot read. A value without the queued field (`<worker>|<ladder>`, an older
 * replica's) reads as having queued nothing.
 */
export function readNewPrefixClaim(value: string, text: string): ReadClaim | undefined {
  const bar = value.indexOf("|");
  if (bar <= 0) return undefined;
  const worker = value.slice(0, bar);
  let ladder = value.slice(bar + 1);
  let queued = 0;
  const second = ladder.indexOf("|");
  if (second >= 0) {
    queued = Number(ladder.slice(0, second));
    if (!Number.isSafeInteger(queued) || queued < 0) return undefined;
    ladder = ladder.slice(second + 1);
  }
  const rungs: { at: number; digest: string }[] = [];
  for (const rung of ladder.split(",")) {
    if (rung === "") continue;
    const colon = rung.indexOf(":");
    const at = Number(rung.slice(0, colon));
    if (colon <= 0 || !Number.isInteger(at) || at <= 0) return undefined;
    if (at > text.length) break;
    rungs.push({ at, digest: rung.slice(colon + 1) });
  }
  const own = prefixDigests(
    text,
    rungs.map((r) => r.at),
  );
  let shared = 0;
  for (let i = 0; i < rungs.length; i++) {
    if (own[i] !== rungs[i]!.digest) break;
    shared = rungs[i]!.at;
  }
  return { worker, shared, queued };
}
