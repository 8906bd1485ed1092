import type { RequestAccount } from "./request-account.js";

/**
 * The --explain-header value, sent with the response headers, so before the engine's cached count
 * exists (that one is in the debug log line and GET /debug/cache): in tokens at the chosen
 * worker's characters per token,
 *   available=<best holder's match>;chosen=<chosen worker's match>;runner_up=<worker>:<its match>
 * then `;reason=<load|session|filter|unknown>` when the chosen worker held less than available.
 * runner_up is the best-holding worker other than the chosen one (`-` when there is none).
 */
export function explainHeaderValue(account: RequestAccount, charsPerToken: number): string {
  const tokens = (chars: number) => Math.round(chars / charsPerToken);
  const runnerUp =
    account.runnerUpId === undefined
      ? "-"
      : `${account.runnerUpId}:${tokens(account.runnerUpChars)}`;
  const value = `available=${tokens(account.availableChars)};chosen=${tokens(account.chosenChars)};runner_up=${runnerUp}`;
  return account.reason === null ? value : `${value};reason=${account.reason}`;
}
