import type { LossReason } from "../scheduling/loss-reason.js";
import type { RouteBranch } from "../scheduling/policy.js";

/** What a decision tells the account (scheduling/scheduler.ts Decision, read, never kept). */
export interface AccountedDecision {
  readonly worker: { readonly id: string };
  readonly branch: RouteBranch;
  readonly matchRate: number | null;
  readonly index: string | null;
  readonly heldBefore: number;
  readonly available: number;
  readonly runnerUp: { readonly id: string } | undefined;
  readonly runnerUpHeld: number;
  readonly lossReason: LossReason | null;
}

/**
 * One request's cache account (docs/hit-rate.md): what the best-holding worker held of its prompt
 * (available), what the chosen worker held by the index's account (chosen), and what the engine
 * reported as cached (reported), in tokens; and the loss split that follows from them. Every
 * component is ≥ 0 and they add up to the prompt:
 *
 *   prompt = reported + index loss + unreported + routing loss + cold
 *
 * - reported: the engine's cached tokens;
 * - index loss: the chosen worker held less than the index claimed (evicted behind its back);
 * - unreported: the index's claim on the chosen worker, unchecked (no cached count in the answer);
 * - routing loss: another worker held more than the chosen one (why: `reason`);
 * - cold: no worker held it, by the index's account and the engine's.
 *
 * The one per-request object that carries the decision's facts (branch, match, index) and the
 * account's numbers together, so a trace span can read them from one place.
 */
export class RequestAccount {
  /** The chosen worker, and the decision's own facts. */
  workerId = "";
  branch: RouteBranch = "cache_miss";
  matchRate: number | null = null;
  index: string | null = null;
  /** Characters: the best holder's match over every decision of the request, the chosen one's. */
  availableChars = 0;
  chosenChars = 0;
  runnerUpId: string | undefined;
  runnerUpChars = 0;
  reason: LossReason | null = null;
  /** Characters per token of the chosen worker (its learned ratio) when the account settled. */
  charsPerToken = 4;
  /** Tokens, set by settle(). */
  promptTokens = 0;
  availableTokens = 0;
  chosenTokens = 0;
  /** Undefined when the engine did not report a cached count. */
  reportedTokens: number | undefined;
  coldTokens = 0;
  routingLossTokens = 0;
  indexLossTokens = 0;
  unreportedTokens = 0;

  constructor(
    /** The prompt's routing text (read only when a loss names its prefix) and its index key. */
    readonly text: string,
    readonly model: string | undefined,
  ) {}

  /**
   * One decision of the request (a retry makes another): the latest names the worker, the best
   * match seen over all of them is what was available. A retry away from the best holder (it
   * failed) is a routing loss by filter.
   */
  decided(decision: AccountedDecision): void {
    this.workerId = decision.worker.id;
    this.branch = decision.branch;
    this.matchRate = decision.matchRate;
    this.index = decision.index;
    this.chosenChars = decision.heldBefore;
    this.runnerUpId = decision.runnerUp?.id;
    this.runnerUpChars = decision.runnerUpHeld;
    if (decision.available >= this.availableChars) {
      this.availableChars = decision.available;
      this.reason = decision.lossReason;
    } else {
      this.reason = "filter";
    }
    if (this.chosenChars >= this.availableChars) this.reason = null;
  }

  /**
   * The answer came: prompt and cached tokens as the engine reported them (undefined when it did
   * not), the chosen worker's characters per token to convert the index's characters.
   */
  settle(
    promptTokens: number | undefined,
    cachedTokens: number | undefined,
    charsPerToken: number,
  ): void {
    this.charsPerToken = charsPerToken;
    const prompt = promptTokens ?? Math.ceil(this.text.length / charsPerToken);
    const available = Math.min(prompt, Math.round(this.availableChars / charsPerToken));
    const chosen = Math.min(available, Math.round(this.chosenChars / charsPerToken));
    this.promptTokens = prompt;
    this.availableTokens = available;
    this.chosenTokens = chosen;
    if (cachedTokens === undefined) {
      this.reportedTokens = undefined;
      this.indexLossTokens = 0;
      this.unreportedTokens = chosen;
      this.routingLossTokens = available - chosen;
      this.coldTokens = prompt - available;
      return;
    }
    // The engine may hold more than the index credited (another router sent the prefix there):
    // what it reported is not lost, whichever part of the account it falls in.
    const reported = Math.min(prompt, cachedTokens);
    this.reportedTokens = reported;
    this.unreportedTokens = 0;
    this.indexLossTokens = chosen > reported ? chosen - reported : 0;
    const covered = chosen > reported ? chosen : reported;
    this.routingLossTokens = available > covered ? available - covered : 0;
    this.coldTokens = prompt - (available > reported ? available : reported);
  }
}
