import { retryAfterSecs } from "../errors.js";
import { CONCURRENCY_RETRY_MS } from "./local-quota-store.js";
import type { QuotaLimits } from "./quota-file.js";
import type { QuotaReason, QuotaUsage } from "./quota-store.js";
import { msUntilFits, slidingUsage, windowIndex } from "./window.js";

/** What /debug/route says of a request's tenant quota (snake_case: it is JSON). */
export interface QuotaExplanation {
  tenant: string;
  tokens_per_minute: number | null;
  /** Tokens counted in the last minute (sliding), as this replica last saw them. */
  tokens_used: number;
  /** What is left of tokens_per_minute now; null without that limit. */
  tokens_left: number | null;
  /** The request's prompt estimate, what admitting it would charge at once. */
  estimate: number;
  concurrent_requests: number | null;
  /** The tenant's requests under way (across replicas with --state-url, as last seen). */
  running: number;
  /** Whether the quota would refuse the request if it came now, and why. */
  would_refuse: boolean;
  reason: QuotaReason | null;
  /** The Retry-After the refusal would carry (s); null when admitted. */
  retry_after_secs: number | null;
}

/**
 * The quota's verdict on a request now, by the same rules the stores apply when they charge
 * (local-quota-store.ts, redis-quota-scripts.ts), computed from the counters as last seen: it
 * reads nothing from Redis and charges nothing.
 */
export function explainQuota(
  tenant: string,
  limits: QuotaLimits,
  usage: QuotaUsage | undefined,
  estimate: number,
  now: number,
): QuotaExplanation {
  // A minute that ended since the counters were read has moved on, as the stores' roll does.
  const { prev, cur } = rolled(usage, now);
  const running = usage?.running ?? 0;
  const used = slidingUsage(prev, cur, now);
  const tpm = limits.tokensPerMinute;
  const conc = limits.concurrentRequests;
  let reason: QuotaExplanation["reason"] = null;
  let retryMs = 0;
  if (conc !== undefined && running >= conc) {
    reason = "quota_concurrency";
    retryMs = CONCURRENCY_RETRY_MS;
  } else if (tpm !== undefined) {
    retryMs = msUntilFits(prev, cur, estimate, tpm, now);
    if (retryMs > 0) reason = "quota_tokens";
  }
  return {
    tenant,
    tokens_per_minute: tpm ?? null,
    tokens_used: Math.round(used),
    tokens_left: tpm === undefined ? null : Math.max(0, Math.floor(tpm - used)),
    estimate,
    concurrent_requests: conc ?? null,
    running,
    would_refuse: reason !== null,
    reason,
    retry_after_secs: reason === null ? null : retryAfterSecs(retryMs),
  };
}

function rolled(usage: QuotaUsage | undefined, now: number): { prev: number; cur: number } {
  if (usage === undefined) return { prev: 0, cur: 0 };
  const then = windowIndex(usage.at);
  const index = windowIndex(now);
  if (index === then) return { prev: usage.prev, cur: usage.cur };
  return { prev: index === then + 1 ? usage.cur : 0, cur: 0 };
}
