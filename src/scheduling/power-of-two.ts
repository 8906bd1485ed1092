import { type RandomSource, randomIndex } from "./options.js";
import type { Policy, PolicyWorker, RouteDecision, RouteRequest } from "./policy.js";

/**
 * Power of two choices: two distinct random candidates, the one with fewer in-flight requests wins
 * (on a tie, the first drawn, itself random). Ignores prefixes.
 */
export class PowerOfTwoPolicy implements Policy {
  readonly name = "power_of_two" as const;
  readonly usesPrefixes = false;

  constructor(private readonly random: RandomSource) {}

  select<W extends PolicyWorker>(
    candidates: readonly W[],
    _request: RouteRequest,
  ): RouteDecision<W> | undefined {
    const n = candidates.length;
    if (n === 0) return undefined;
    let worker = candidates[0]!;
    if (n > 1) {
      const first = randomIndex(this.random, n);
      // Draw from the n - 1 others and skip over `first`: distinct without retrying.
      let second = randomIndex(this.random, n - 1);
      if (second >= first) second++;
      const a = candidates[first]!;
      const b = candidates[second]!;
      worker = b.inFlight < a.inFlight ? b : a;
    }
    return { worker, branch: "power_of_two", matchRate: null };
  }
}
