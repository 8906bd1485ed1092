import { fmix32 } from "../hash/fmix32.js";
import { ownCopy } from "../tree/edge-match.js";

/**
 * Characters of a prefix that name it, and how many of them are hashed (evenly spaced, so a
 * losing request pays 64 steps, not 1024): prompts alike at those characters count as one.
 */
export const PREFIX_KEY_CHARS = 1024;
const PREFIX_KEY_SAMPLES = 64;
/** Characters of a prefix shown next to its hash. */
export const PREFIX_HEAD_CHARS = 40;

export interface PrefixLoss {
  /** Hash of the first PREFIX_KEY_CHARS characters, sampled (hex). */
  hash: string;
  /** Its first PREFIX_HEAD_CHARS characters. */
  head: string;
  /** Tokens lost, and the requests that lost them. */
  tokens: number;
  requests: number;
}

interface Entry {
  head: string;
  tokens: number;
  requests: number;
}

/**
 * The prefixes that lost the most tokens (to routing, or to eviction), approximately and in
 * bounded memory: at most `capacity` prefixes are tracked per generation; a new one in a full
 * generation takes the place of the least-lost (a scan of `capacity`, paid only by a losing
 * request whose prefix is not tracked yet). Two generations of half the window each: `rotate`
 * drops the older, so what is listed lost its tokens within the last window.
 */
export class TopPrefixes {
  private current = new Map<number, Entry>();
  private previous = new Map<number, Entry>();

  constructor(private readonly capacity: number) {}

  /** `tokens` of `text`'s prefix lost (the first `held` characters were the ones held elsewhere). */
  add(text: string, held: number, tokens: number): void {
    const key = prefixHash(text, Math.min(held, PREFIX_KEY_CHARS));
    const entry = this.current.get(key);
    if (entry !== undefined) {
      entry.tokens += tokens;
      entry.requests += 1;
      return;
    }
    if (this.current.size >= this.capacity) this.dropLeast();
    // A flat copy: a slice would keep the whole prompt alive for as long as the entry is listed.
    const head = ownCopy(text.slice(0, PREFIX_HEAD_CHARS));
    this.current.set(key, { head, tokens, requests: 1 });
  }

  rotate(): void {
    this.previous = this.current;
    this.current = new Map();
  }

  /** The `n` that lost the most over both generations. */
  top(n: number): PrefixLoss[] {
    const merged = new Map<number, Entry>();
    for (const gen of [this.previous, this.current]) {
      for (const [key, e] of gen) {
        const m = merged.get(key);
        if (m === undefined) merged.set(key, { ...e });
        else {
          m.tokens += e.tokens;
          m.requests += e.requests;
        }
      }
    }
    return [...merged]
      .sort((a, b) => b[1].tokens - a[1].tokens)
      .slice(0, n)
      .map(([key, e]) => ({
        hash: key.toString(16).padStart(8, "0"),
        head: e.head,
        tokens: e.tokens,
        requests: e.requests,
      }));
  }

  private dropLeast(): void {
    let least: number | undefined;
    let min = Number.POSITIVE_INFINITY;
    for (const [key, e] of this.current) {
      if (e.tokens < min) {
        min = e.tokens;
        least = key;
      }
    }
    if (least !== undefined) this.current.delete(least);
  }
}

/**
 * A 32-bit hash of the first `n` characters: FNV-1a over at most PREFIX_KEY_SAMPLES UTF-16 code
 * units evenly spaced among them (all of them for a short prefix), and their count, then mixed.
 */
export function prefixHash(text: string, n: number): number {
  let h = 0x811c9dc5;
  const end = Math.min(n, text.length);
  const step = end <= PREFIX_KEY_SAMPLES ? 1 : end / PREFIX_KEY_SAMPLES;
  for (let x = 0; x < end; x += step) h = Math.imul(h ^ text.charCodeAt(x | 0), 0x01000193);
  return fmix32(h ^ end);
}
