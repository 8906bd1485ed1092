import { type RandomSource, randomIndex } from "./options.js";
import type { Policy, PolicyWorker, RouteDecision, RouteRequest } from "./policy.js";

/** A uniformly random candidate. Ignores load and prefixes. */
export class RandomPolicy implements Policy {
  readonly name = "random" as const;
  readonly usesPrefixes = false;

  constructor(private readonly random: RandomSource) {}

  select<W extends PolicyWorker>(
    candidates: readonly W[],
    _request: RouteRequest,
  ): RouteDecision<W> | undefined {
    const n = candidates.length;
    if (n === 0) return undefined;
    const worker = candidates[randomIndex(this.random, n)]!;
    return { worker, branch: "random", matchRate: null };
  }
}
