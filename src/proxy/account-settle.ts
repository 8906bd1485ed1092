/**
 * A request's cache account (cache-account/) at the two points both forwarders reach: the
 * --explain-header when a worker is chosen, the settlement when that worker accepted the request.
 * The regular forwarder (forward.ts) and the prefill/decode pair's (disaggregation/) share them.
 */
import type { CacheLedger } from "../cache-account/cache-ledger.js";
import type { RequestAccount } from "../cache-account/request-account.js";
import type { Worker } from "../workers/worker.js";
import type { RoutingRequest } from "./routing-request.js";
import type { ReportedUsage } from "./usage-tap.js";

/** The --explain-header name and value for the account as decided, with `worker` chosen; else undefined. */
export function explainHeader(
  ledger: CacheLedger | undefined,
  account: RequestAccount | undefined,
  worker: Worker,
): readonly [name: string, value: string] | undefined {
  const name = ledger?.options.explainHeader;
  if (ledger === undefined || name === undefined || account === undefined) return undefined;
  return [name, ledger.explain(account, worker.charsPerToken)];
}

/** Settles an accepted request's account with what `worker` reported, and records it. */
export function settleAccount(
  ledger: CacheLedger | undefined,
  account: RequestAccount,
  routed: RoutingRequest,
  reported: ReportedUsage | undefined,
  worker: Worker,
  requestId: string,
): void {
  // A batch's usage is the sum over its prompts, not this text's: counted from the text then.
  const usage = routed.usageDescribesText ? reported : undefined;
  account.settle(usage?.promptTokens, usage?.cachedTokens, worker.charsPerToken);
  ledger?.record(account, requestId);
}
