/**
 * Tokens of a prompt's last KV block that an engine does not cache (only full blocks are): half a
 * block on average, at vLLM's default block of 16 tokens.
 */
const PARTIAL_BLOCK_TOKENS = 8;
/** Weight kept by the older samples at each new one: about the last 50 requests count. */
const DECAY = 0.98;
/** A completion longer than this is no sample of a typical one (bounded, so the mean stays finite). */
const MAX_SAMPLE_TOKENS = 1 << 20;

/**
 * What each running request holds of its engine's KV beyond the routing text the prefix index
 * keeps: the tokens it generates (a block-LRU engine pins them while the request runs; the
 * simulator and SGLang reserve the output at admission, vLLM allocates it step by step) and its
 * last partial block. Learned per worker as a decaying mean of the completion tokens its engine
 * reports; the index keeps its budget less this times the running requests (PrefixIndex.reserve),
 * so that its picture of the engine's cache does not claim the room those requests take.
 */
export class RunningReserve {
  private tokens = 0;
  private weight = 0;

  /** One finished request that generated `completionTokens` (skipped when not a count). */
  observe(completionTokens: number | undefined): void {
    if (completionTokens === undefined || !Number.isSafeInteger(completionTokens)) return;
    if (completionTokens < 0 || completionTokens > MAX_SAMPLE_TOKENS) return;
    this.tokens = this.tokens * DECAY + completionTokens;
    this.weight = this.weight * DECAY + 1;
  }

  /** Mean completion tokens so far (0 until a sample). */
  get outputTokens(): number {
    return this.weight > 0 ? this.tokens / this.weight : 0;
  }

  /** Characters of KV one running request holds beyond its text, at `charsPerToken`. */
  chars(charsPerToken: number): number {
    return Math.round((this.outputTokens + PARTIAL_BLOCK_TOKENS) * charsPerToken);
  }
}
