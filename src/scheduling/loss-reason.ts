import type { RouteBranch } from "./policy.js";

/**
 * Why a decision did not take the candidate holding the longest prefix of the text (a routing
 * loss, docs/hit-rate.md):
 * - load: the policy weighed load or cost against the match and load won (cache_aware's balance
 *   gate, load bound or threshold; prefix_cost's cost; a scheduling profile's scores);
 * - session: --session-affinity kept the conversation on its worker;
 * - filter: the best holder was not eligible: a scheduling profile's filter removed it, or it was
 *   tried already for this request and failed (the retry went elsewhere);
 * - unknown: anything else (a peer replica's claim, a hash ring's home, a policy blind to prefixes).
 */
export const LOSS_REASONS = ["load", "session", "filter", "unknown"] as const;
export type LossReason = (typeof LOSS_REASONS)[number];

/**
 * Branches whose choice did not weigh the match against load: a replica's claim, a hash ring's
 * home, the policies blind to prefixes. Every other branch that missed the best holder did so for
 * load or cost (cache_hit too: the best holder was over cache_aware's load bound, and the best
 * one within it was taken).
 */
const UNKNOWN_BRANCHES: ReadonlySet<RouteBranch> = new Set<RouteBranch>([
  "peer_claim",
  "round_robin",
  "random",
  "ring_home",
]);

/** The reason for a branch that did not take the best holder (its filter verdict aside). */
export function lossReasonOf(branch: RouteBranch, bestFiltered: boolean): LossReason {
  if (branch === "session") return "session";
  if (bestFiltered) return "filter";
  return UNKNOWN_BRANCHES.has(branch) ? "unknown" : "load";
}
