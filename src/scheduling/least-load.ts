import { LeastLoaded } from "./least-loaded.js";
import type { Policy, PolicyWorker, RouteDecision, RouteRequest } from "./policy.js";

/** The worker with the fewest in-flight requests; equal loads take turns. Ignores prefixes. */
export class LeastLoadPolicy implements Policy {
  readonly name = "least_load" as const;
  readonly usesPrefixes = false;
  private readonly loads = new LeastLoaded();

  select<W extends PolicyWorker>(
    candidates: readonly W[],
    _request: RouteRequest,
  ): RouteDecision<W> | undefined {
    const worker = this.loads.pick(candidates);
    return worker === undefined ? undefined : { worker, branch: "least_load", matchRate: null };
  }
}
