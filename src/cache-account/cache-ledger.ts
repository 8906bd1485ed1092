import type { Logger } from "../logger.js";
import { type AccountTotals, addAccount, emptyTotals, totalsJson } from "./account-totals.js";
import { AccountWindow } from "./account-window.js";
import { explainHeaderValue } from "./explain-header.js";
import { type AccountedDecision, RequestAccount } from "./request-account.js";
import type { CacheAccountOptions } from "./settings.js";
import { PREFIX_HEAD_CHARS, PREFIX_KEY_CHARS, TopPrefixes } from "./top-prefixes.js";

/** Prefixes tracked per table and generation, for each one listed. */
const TRACKED_PER_LISTED = 8;
/**
 * Smaller losses do not name a prefix in the top tables (they still count everywhere else): an
 * engine caches whole pages and recomputes the last prompt token, so a few tokens of "index loss"
 * on most requests are rounding, and hashing a prefix for each would be paid by every request.
 */
const MIN_LISTED_LOSS_TOKENS = 32;

/**
 * The cache account of every request that used a prefix index (docs/hit-rate.md): one
 * RequestAccount per request (open, then decided by each decision, settled when the answer
 * ended), summed since start (the Prometheus counters, read at scrape time), per minute over the
 * window (GET /debug/cache), and the prefixes that lost the most. A request costs a few additions;
 * only a request that lost tokens hashes its prefix's first characters.
 */
export class CacheLedger {
  /** Since start: what the counters export. */
  readonly totals: AccountTotals = emptyTotals();
  readonly window: AccountWindow;
  private readonly routingLosers: TopPrefixes;
  private readonly evictionLosers: TopPrefixes;
  private rotatedAt: number;
  private readonly halfWindowMs: number;

  constructor(
    readonly options: CacheAccountOptions,
    private readonly logger: Logger,
    now = Date.now(),
  ) {
    this.window = new AccountWindow(options.windowMins);
    const tracked = options.topPrefixes * TRACKED_PER_LISTED;
    this.routingLosers = new TopPrefixes(tracked);
    this.evictionLosers = new TopPrefixes(tracked);
    this.rotatedAt = now;
    this.halfWindowMs = (options.windowMins * 60_000) / 2;
  }

  /** A request's account, before its first decision. */
  open(text: string, model: string | undefined): RequestAccount {
    return new RequestAccount(text, model);
  }

  /**
   * An attempt's decision, in the request's account: opened at its first decision, each later
   * one (a retry) replacing what the account holds. One call per attempt for the forwarder: the
   * account, and the --explain-header it sends with the chosen worker's answer.
   */
  decided(
    account: RequestAccount | undefined,
    request: { readonly text: string; readonly model: string | undefined },
    decision: AccountedDecision & { readonly worker: { readonly charsPerToken: number } },
  ): { account: RequestAccount; explain: readonly [name: string, value: string] | undefined } {
    const opened = account ?? this.open(request.text, request.model);
    opened.decided(decision);
    return { account: opened, explain: this.explainHeader(opened, decision.worker.charsPerToken) };
  }

  /** The --explain-header value for the request as decided (the answer's count is not known yet). */
  explain(account: RequestAccount, charsPerToken: number): string {
    return explainHeaderValue(account, charsPerToken);
  }

  /** The --explain-header name and value for the account as decided, with that worker chosen. */
  explainHeader(
    account: RequestAccount | undefined,
    charsPerToken: number,
  ): readonly [name: string, value: string] | undefined {
    const name = this.options.explainHeader;
    if (name === undefined || account === undefined) return undefined;
    return [name, this.explain(account, charsPerToken)];
  }

  /**
   * An accepted request's account settled with what its worker reported (`usage`, when it
   * describes this text: a batch's usage is the sum over its prompts, so it is counted from the
   * text then), and recorded.
   */
  settle(
    account: RequestAccount,
    usage: { readonly promptTokens: number; readonly cachedTokens: number | undefined } | undefined,
    charsPerToken: number,
    requestId: string,
  ): void {
    account.settle(usage?.promptTokens, usage?.cachedTokens, charsPerToken);
    this.record(account, requestId);
  }

  /** Told of every settled account (the fleet saturation signal counts its uncached tokens). */
  onRecord: ((account: RequestAccount) => void) | undefined;

  /** A settled account (request-account.ts settle) joins the sums. */
  record(account: RequestAccount, requestId: string, now = Date.now()): void {
    this.onRecord?.(account);
    addAccount(this.totals, account);
    this.window.add(account, now);
    if (now - this.rotatedAt >= this.halfWindowMs) {
      this.rotatedAt = now;
      this.routingLosers.rotate();
      this.evictionLosers.rotate();
    }
    if (account.routingLossTokens >= MIN_LISTED_LOSS_TOKENS) {
      this.routingLosers.add(account.text, account.availableChars, account.routingLossTokens);
    }
    if (account.indexLossTokens >= MIN_LISTED_LOSS_TOKENS) {
      this.evictionLosers.add(account.text, account.chosenChars, account.indexLossTokens);
    }
    if (this.logger.isLevelEnabled("debug")) {
      this.logger.debug(
        {
          request_id: requestId,
          worker: account.workerId,
          model: account.model,
          branch: account.branch,
          prompt_tokens: account.promptTokens,
          available_tokens: account.availableTokens,
          chosen_tokens: account.chosenTokens,
          reported_cached_tokens: account.reportedTokens,
          runner_up: account.runnerUpId,
          runner_up_tokens: Math.round(account.runnerUpChars / account.charsPerToken),
          cold_tokens: account.coldTokens,
          routing_loss_tokens: account.routingLossTokens,
          routing_loss_reason: account.routingLossTokens > 0 ? account.reason : undefined,
          index_loss_tokens: account.indexLossTokens,
        },
        "cache account",
      );
    }
  }

  /** GET /debug/cache: the window's account overall, per worker, per model, and the top losers. */
  snapshot(now = Date.now()) {
    const { since, all, workers, models } = this.window.snapshot(now);
    const perKey = (map: Map<string, AccountTotals>) =>
      Object.fromEntries([...map].map(([key, t]) => [key, totalsJson(t)]));
    const n = this.options.topPrefixes;
    return {
      window_minutes: this.options.windowMins,
      since: new Date(since).toISOString(),
      unit: "tokens",
      ...totalsJson(all),
      workers: perKey(workers),
      models: perKey(models),
      prefixes: {
        key_chars: PREFIX_KEY_CHARS,
        head_chars: PREFIX_HEAD_CHARS,
        lost_to_routing: this.routingLosers.top(n),
        lost_to_eviction: this.evictionLosers.top(n),
      },
    };
  }
}
