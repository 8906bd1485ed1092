import type { PolicyWorker } from "../scheduling/policy.js";
import type { Decision, DecisionRequest, Scheduler } from "../scheduling/scheduler.js";
import type { Worker } from "../workers/worker.js";
import type { ReportedUsage } from "./usage-tap.js";

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

  apply(
    worker: Worker,
    usage: ReportedUsage,
    decision: Decision<PolicyWorker>,
    request: DecisionRequest,
    decider: Scheduler,
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
