/**
 * Wraps a router's scheduler so a bench tally sees every decision (both ways in: decide, and
 * decideAgreed, the forwarder's first attempt). The scheduler is reached through a private
 * field, as no production path needs this hook.
 */
import type { PolicyWorker } from "../../src/scheduling/policy.js";
import type { Scheduler } from "../../src/scheduling/scheduler.js";
import type { RunningRouter } from "../../src/server.js";

export type Decided = ReturnType<Scheduler["decide"]>;
export type DecisionRequest = Parameters<Scheduler["decide"]>[1];

/** `measure` runs `decide` itself (and may look before and after); returns the scheduler. */
export function hookDecisions(
  router: RunningRouter,
  measure: (
    candidates: readonly PolicyWorker[],
    request: DecisionRequest,
    decide: () => Decided | Promise<Decided>,
  ) => Decided | Promise<Decided>,
): Scheduler {
  const decider = (router.context.forwarder as unknown as { decider: Scheduler }).decider;
  const original = decider.decide.bind(decider);
  const agreed = decider.decideAgreed.bind(decider);
  decider.decide = ((candidates: readonly PolicyWorker[], request) =>
    measure(candidates, request, () => original(candidates, request))) as Scheduler["decide"];
  decider.decideAgreed = ((candidates: readonly PolicyWorker[], request) =>
    measure(candidates, request, () => agreed(candidates, request))) as Scheduler["decideAgreed"];
  return decider;
}
