import type { Worker } from "../workers/worker.js";

/** What an engine's answer reported of its prompt (the proxy's usage tap reads it). */
export interface PromptUsage {
  readonly promptTokens: number;
  /** Undefined when the engine does not report cached tokens (vLLM without the flag). */
  readonly cachedTokens: number | undefined;
  /** Tokens generated; undefined when not reported (an OpenAI stream without include_usage). */
  readonly completionTokens?: number | undefined;
}

/** What the feedback reads of a decision: the index that answered and what the worker held. */
interface Decided {
  readonly index: string | null;
  readonly heldBefore: number;
}

/** Where what the engine reported goes: the scheduler (Scheduler.outcome, Scheduler.reported). */
interface Corrects<D extends Decided, R extends { readonly text: string }> {
  outcome(decision: D, promptTokens: number, cachedTokens: number): void;
  reported(decision: D, request: R, engineHeld: number): number;
}

/**
 * An engine is "clearly" holding less than the index claimed when the gap is over both of these:
 * engines cache whole pages only and recompute the last prompt token, and the chat template shifts
 * the count by a few tokens, so small gaps are noise, not evictions.
 */
const MIN_GAP_TOKENS = 64;
const MIN_GAP_FRACTION = 0.2;

export interface UsageFeedbackHooks {
  /** Engine-reported prompt and cached tokens (cached is 0 when the engine does not say). */
  onEngineTokens(worker: Worker, promptTokens: number, cachedTokens: number): void;
  /** The index was trimmed to what the engine reported. */
  onCorrection(worker: Worker, forgottenChars: number): void;
}

/**
 * What a worker's response reported about its prompt, applied where it teaches something:
 * the worker's characters per token (prompt tokens against the routing text's length), the
 * engine token counters, and the prefix index when the engine held clearly less than the index
 * claimed (its KV cache evicted what the router still remembered).
 */
export class UsageFeedback {
  constructor(private readonly hooks: UsageFeedbackHooks) {}

  apply<D extends Decided, R extends { readonly text: string }>(
    worker: Worker,
    usage: PromptUsage,
    decision: D,
    request: R,
    decider: Corrects<D, R>,
    /**
     * aboutText: one prompt, so the usage describes the routing text (not a batch's sum).
     * othersPrefilling: the worker was still prefilling other requests when this one was sent; an
     * engine counts a prefix as cached only once computed, so a burst on a new prefix reports few
     * cached tokens without any eviction: no correction then.
     */
    { aboutText, othersPrefilling = false }: { aboutText: boolean; othersPrefilling?: boolean },
  ): void {
    const { promptTokens, cachedTokens } = usage;
    this.hooks.onEngineTokens(worker, promptTokens, cachedTokens ?? 0);
    if (!aboutText) return;
    decider.outcome(decision, promptTokens, cachedTokens ?? 0);
    worker.learnCharsPerToken(request.text.length, promptTokens);
    worker.running.observe(usage.completionTokens);
    if (cachedTokens === undefined || decision.index === null || othersPrefilling) return;
    const engineHeld = engineHeldChars(
      decision.heldBefore,
      cachedTokens,
      promptTokens,
      request.text.length,
      worker.charsPerToken,
    );
    if (engineHeld === undefined) return;
    const forgotten = decider.reported(decision, request, engineHeld);
    if (forgotten <= 0) return;
    worker.noteFeedbackCorrection();
    this.hooks.onCorrection(worker, forgotten);
  }
}

/**
 * How many characters of the text the engine held before this request, when that is clearly less
 * than the index claimed (`claimed`); undefined when there is nothing to correct. Tokens become
 * characters at the worker's ratio, rounded up: when in doubt the index keeps more, not less.
 */
export function engineHeldChars(
  claimed: number,
  cachedTokens: number,
  promptTokens: number,
  textLength: number,
  charsPerToken: number,
): number | undefined {
  if (claimed <= 0 || promptTokens <= 0) return undefined;
  // The engine held everything it was asked for: nothing to learn.
  if (cachedTokens >= promptTokens) return undefined;
  const held = Math.min(textLength, Math.ceil(cachedTokens * charsPerToken));
  const gap = claimed - held;
  if (gap <= MIN_GAP_TOKENS * charsPerToken || gap <= MIN_GAP_FRACTION * claimed) return undefined;
  return held;
}
