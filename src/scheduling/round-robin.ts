import type { Policy, PolicyWorker, RouteDecision, RouteRequest } from "./policy.js";
import { Rotation } from "./rotation.js";

/** Each call takes the next candidate in turn. Ignores load and prefixes. */
export class RoundRobinPolicy implements Policy {
  readonly name = "round_robin" as const;
  readonly usesPrefixes = false;
  private readonly rotation = new Rotation();

  select<W extends PolicyWorker>(
    candidates: readonly W[],
    _request: RouteRequest,
  ): RouteDecision<W> | undefined {
    const n = candidates.length;
    if (n === 0) return undefined;
    const worker = candidates[this.rotation.next(n)]!;
    return { worker, branch: "round_robin", matchRate: null };
  }
}
