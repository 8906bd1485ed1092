/** What the router assumes before a worker has reported any usage (a common English average). */
export const DEFAULT_CHARS_PER_TOKEN = 4;

/** Samples smaller than this are mostly chat-template tokens, not the text: they are skipped. */
const MIN_SAMPLE_TOKENS = 16;
/** Ratios outside this range come from a mismatched text (tool schemas, images): skipped. */
const MIN_RATIO = 0.5;
const MAX_RATIO = 16;
/** Weight kept by the older samples at each new one: about the last 50 requests count. */
const DECAY = 0.98;

/**
 * A worker's characters of routing text per prompt token, learned from the prompt token counts
 * its engine reports: a running average weighted by tokens, so long prompts count more, and
 * decaying, so it follows a change of workload. The routing text is not exactly what the engine
 * tokenizes (the chat template adds a few tokens, the routing text adds role markers), which is
 * why tiny samples are skipped.
 */
export class CharsPerToken {
  private chars = 0;
  private tokens = 0;
  /** Samples taken so far. */
  samples = 0;

  /** The current estimate: the default until a sample was taken. */
  get value(): number {
    return this.tokens > 0 ? this.chars / this.tokens : DEFAULT_CHARS_PER_TOKEN;
  }

  /** One request: `chars` of routing text that the engine counted as `tokens` prompt tokens. */
  observe(chars: number, tokens: number): boolean {
    if (!(tokens >= MIN_SAMPLE_TOKENS) || !(chars > 0)) return false;
    const ratio = chars / tokens;
    if (ratio < MIN_RATIO || ratio > MAX_RATIO) return false;
    this.chars = this.chars * DECAY + chars;
    this.tokens = this.tokens * DECAY + tokens;
    this.samples += 1;
    return true;
  }
}
