import type { RouteBranch } from "./policy.js";

/**
 * Why a decision did not take the candidate holding the longest prefix of the text (a routing
 * loss, docs/hit-rate.md):
 * - load: the policy weighed load or cost against the match and load won (cache_aware's balance
 *   gate, load bound or threshold; prefix_cost; a scheduling profile's picker);
 * - session: --session-affinity kept the conversation on its worker;
 * - filter: the best holder was not eligible: a scheduling profile's filter removed it, or it was
 *   tried already for this request and failed (the retry went elsewhere);
 * - unknown: anything else (a peer replica's claim, a hash ring's home, a policy blind to prefixes).
 */
export type LossReason = "load" | "session" | "filter" | "unknown";

export const LOSS_REASONS: readonly LossReason[] = ["load", "session", "filter", "unknown"];

/** Branches whose choice weighed the match against load or cost. */
const LOAD_BRANCHES: ReadonlySet<RouteBranch> = new Set<RouteBranch>([
  "cache_miss",
  "imbalanced",
  "load_bound",
  "lowest_cost",
  "max_score",
  "max_score_tie",
  "weighted_random",
  "softmax",
  "prefix_match",
  "least_request",
  "ring_walk",
  "ring_default",
  "power_of_two",
  "least_load",
]);

/** The reason for a branch that did not take the best holder (its filter verdict aside). */
export function lossReasonOf(branch: RouteBranch, bestFiltered: boolean): LossReason {
  if (branch === "session") return "session";
  if (bestFiltered) return "filter";
  return LOAD_BRANCHES.has(branch) ? "load" : "unknown";
}
