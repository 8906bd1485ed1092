import { TREE_INDEX_NAMES } from "../index/factory.js";
import type { RouteBranch } from "../scheduling/policy.js";

const BASE_INDEXES: ReadonlySet<string> = new Set(TREE_INDEX_NAMES);

/**
 * The x-radixgate-route header: the branch (the picker's outcome for a scheduling profile), the
 * match rate when the policy read prefixes, the index when not a base one, and the profile's name
 * when a scheduling profile decided.
 */
export function routeHeader(
  branch: RouteBranch,
  matchRate: number | null,
  index: string | null,
  profile?: string,
): string {
  let route = matchRate === null ? branch : `${branch};match=${matchRate.toFixed(2)}`;
  // The trees (approx, shared: the same answers) go unnamed; any other index says it answered.
  if (index !== null && !BASE_INDEXES.has(index)) route = `${route};index=${index}`;
  return profile === undefined ? route : `${route};profile=${profile}`;
}
