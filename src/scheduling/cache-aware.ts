import { loadCap, ownLoad } from "./load-cap.js";
import type { ResolvedPolicyOptions } from "./options.js";
import { onAlive, type Pick as Picked, type Picker, type SchedulingContext } from "./plugin.js";
import type { RouteBranch } from "./policy.js";
import { LeastLoaded } from "./rotation.js";

export type CacheAwareOptions = Pick<
  ResolvedPolicyOptions,
  "cacheThreshold" | "balanceAbsThreshold" | "balanceRelThreshold" | "cacheLoadBound"
>;

/**
 * The SGLang router's cache-aware policy, with its defaults (see POLICY_DEFAULTS):
 *
 * 1. If the candidates' in-flight counts are out of balance, i.e. (max - min) > balanceAbsThreshold
 *    AND max > min * balanceRelThreshold, load wins: the least-loaded worker ("imbalanced").
 * 2. Otherwise the worker that holds the longest prefix of the text, if matched / length is
 *    strictly above cacheThreshold ("cache_hit"); among equal best matches, the least loaded.
 *    A worker wins on prefix only while its in-flight count is at most cacheLoadBound × the mean
 *    in-flight of the candidates, plus one; when the best match is over that bound, the least-loaded
 *    worker takes the request ("load_bound") and, once it holds the prefix too, the two share it.
 *    That bound weighs this router's own in-flight counts (load-cap.ts `ownLoad`).
 * 3. Otherwise the least-loaded worker ("cache_miss").
 * Matched lengths come from the prefix index (request.matched); the scheduler inserts the text for
 * the chosen worker in every branch: it is what that worker will cache. --policy cache_aware is
 * the profile of this picker alone (builtin-profiles.ts).
 *
 * Fixed against the original: a single hot prefix (one system prompt for all traffic) no longer
 * piles every request onto one worker while the in-flight gap stays under the absolute imbalance
 * threshold (64 by default, more than a small fleet ever reaches); ties on load rotate (the original always took the first worker,
 * so cold traffic at low concurrency piled onto one), and no per-worker state lives here: the
 * prefix index keeps it, so a worker that drops out of the candidates for a while keeps what it
 * holds and a removed worker leaves nothing behind.
 */
export class CacheAwarePicker implements Picker {
  readonly type = "cache-aware-picker";
  readonly usesPrefixes = true;
  private readonly loads = new LeastLoaded();
  private readonly cacheThreshold: number;
  private readonly balanceAbsThreshold: number;
  private readonly balanceRelThreshold: number;
  private readonly cacheLoadBound: number;

  constructor(
    readonly name: string,
    options: CacheAwareOptions,
  ) {
    this.cacheLoadBound = options.cacheLoadBound;
    this.cacheThreshold = options.cacheThreshold;
    this.balanceAbsThreshold = options.balanceAbsThreshold;
    this.balanceRelThreshold = options.balanceRelThreshold;
  }

  pick(ctx: SchedulingContext): Picked | -1 {
    return onAlive(ctx, this.choose);
  }

  private readonly choose = (ctx: SchedulingContext): Picked | -1 => {
    const candidates = ctx.candidates;
    const least = this.loads.scan(candidates, ctx.request.replicaRank);
    if (least < 0) return -1;
    const length = ctx.length;
    const matchedOf = ctx.request.matched;
    const min = this.loads.min;
    const max = this.loads.max;

    let chosen = least;
    let branch: RouteBranch;
    if (max - min > this.balanceAbsThreshold && max > min * this.balanceRelThreshold) {
      branch = "imbalanced";
    } else {
      branch = "cache_miss";
      if (length > 0) {
        // One pass in the same rotated order as the load scan so that
        // equal matches on equal loads take turns too.
        const n = candidates.length;
        const start = this.loads.start;
        // Some worker is always within the bound (the least own load is at most the own mean).
        const bound = loadCap(candidates, this.cacheLoadBound);
        let best = least;
        let bestMatched = -1;
        let bestLoad = 0;
        let overBoundMatched = 0;
        for (let i = 0; i < n; i++) {
          let index = start + i;
          if (index >= n) index -= n;
          const worker = candidates[index]!;
          const m = matchedOf?.[index] ?? 0;
          if (ownLoad(worker) > bound) {
            if (m > overBoundMatched) overBoundMatched = m;
          } else if (m > bestMatched || (m === bestMatched && worker.inFlight < bestLoad)) {
            best = index;
            bestMatched = m;
            bestLoad = worker.inFlight;
          }
        }
        if (bestMatched / length > this.cacheThreshold) {
          branch = "cache_hit";
          chosen = best;
        } else if (overBoundMatched / length > this.cacheThreshold) {
          branch = "load_bound";
        }
      }
    }
    // The profile reports the chosen worker's match rate (in every branch, as the original).
    return { index: chosen, branch };
  };
}
