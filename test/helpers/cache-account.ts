/** What the cache-account tests share: prompt filler and the shape of /debug/cache's totals. */

/** `n` characters of deterministic filler, no newlines, different for each seed. */
export function filler(seed: string, n: number): string {
  let out = "";
  for (let i = 0; out.length < n; i++) out += `${seed}${i} `;
  return out.slice(0, n);
}

/** One row of /debug/cache (the whole window, one worker or one model). */
export interface CacheTotals {
  requests: number;
  prompt_tokens: number;
  available_tokens: number;
  chosen_tokens: number;
  reported_cached_tokens: number;
  cold_tokens: number;
  routing_loss_tokens: Record<"load" | "session" | "filter" | "unknown" | "total", number>;
  index_loss_tokens: number;
  unreported_tokens: number;
}
