import { LOSS_REASONS, type LossReason } from "../scheduling/loss-reason.js";
import type { RequestAccount } from "./request-account.js";

/** Sums of request accounts, in tokens (request-account.ts says what each part means). */
export interface AccountTotals {
  requests: number;
  prompt: number;
  available: number;
  chosen: number;
  /** Cached tokens the engines reported (requests whose answer carried a count). */
  reported: number;
  cold: number;
  routingLoss: Record<LossReason, number>;
  indexLoss: number;
  unreported: number;
}

export function emptyTotals(): AccountTotals {
  return {
    requests: 0,
    prompt: 0,
    available: 0,
    chosen: 0,
    reported: 0,
    cold: 0,
    routingLoss: { load: 0, session: 0, filter: 0, unknown: 0 },
    indexLoss: 0,
    unreported: 0,
  };
}

/** Adds one settled account: a handful of additions. */
export function addAccount(into: AccountTotals, a: RequestAccount): void {
  into.requests += 1;
  into.prompt += a.promptTokens;
  into.available += a.availableTokens;
  into.chosen += a.chosenTokens;
  into.reported += a.reportedTokens ?? 0;
  into.cold += a.coldTokens;
  if (a.routingLossTokens > 0) into.routingLoss[a.reason ?? "unknown"] += a.routingLossTokens;
  into.indexLoss += a.indexLossTokens;
  into.unreported += a.unreportedTokens;
}

export function addTotals(into: AccountTotals, from: AccountTotals): void {
  into.requests += from.requests;
  into.prompt += from.prompt;
  into.available += from.available;
  into.chosen += from.chosen;
  into.reported += from.reported;
  into.cold += from.cold;
  for (const reason of LOSS_REASONS) into.routingLoss[reason] += from.routingLoss[reason];
  into.indexLoss += from.indexLoss;
  into.unreported += from.unreported;
}

/** The JSON of GET /debug/cache: tokens, and each part as a share of the prompt tokens. */
export function totalsJson(t: AccountTotals) {
  const share = (n: number) => (t.prompt > 0 ? Number((n / t.prompt).toFixed(4)) : 0);
  const routing = LOSS_REASONS.reduce((sum, reason) => sum + t.routingLoss[reason], 0);
  return {
    requests: t.requests,
    prompt_tokens: t.prompt,
    available_tokens: t.available,
    chosen_tokens: t.chosen,
    reported_cached_tokens: t.reported,
    cold_tokens: t.cold,
    routing_loss_tokens: { ...t.routingLoss, total: routing },
    index_loss_tokens: t.indexLoss,
    unreported_tokens: t.unreported,
    shares: {
      reported_cached: share(t.reported),
      cold: share(t.cold),
      routing_loss: share(routing),
      index_loss: share(t.indexLoss),
      unreported: share(t.unreported),
    },
  };
}
