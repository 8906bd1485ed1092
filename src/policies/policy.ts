import type { RadixTree } from "../tree/radix-tree.js";

/**
 * What a policy may see of a worker: its id, the router's own in-flight count for it, and its
 * approximate prefix tree. Policies never see URLs, HTTP or health: the caller passes only the
 * candidates (healthy workers whose breaker admits a request).
 */
export interface PolicyWorker {
  readonly id: string;
  readonly inFlight: number;
  readonly tree: RadixTree;
}

/** Why a worker was chosen; exported as a metric label and in the x-radixgate-route header. */
export type RouteBranch =
  | "cache_hit" // cache_aware: best match_rate above cache_threshold
  | "cache_miss" // cache_aware: no worker matched enough, least loaded chosen
  | "imbalanced" // cache_aware: fleet out of balance, least loaded chosen
  | "load_bound" // cache_aware: the best match was over the load bound, least loaded chosen
  | "round_robin"
  | "random"
  | "power_of_two"
  | "least_load";

export interface RouteRequest {
  /** The text the engine will prefill (see proxy/routing-text.ts). May be empty. */
  readonly text: string;
  /** The requested model, when the body names one (reserved for per-model trees). */
  readonly model?: string | undefined;
}

export interface RouteDecision<W extends PolicyWorker> {
  readonly worker: W;
  readonly branch: RouteBranch;
  /** matched characters / text characters for the chosen worker; null when the policy does not look at prefixes. */
  readonly matchRate: number | null;
}

export interface Policy {
  readonly name: PolicyName;
  /** Pick one of `candidates`, or undefined when there are none. Never returns a non-candidate. */
  select<W extends PolicyWorker>(
    candidates: readonly W[],
    request: RouteRequest,
  ): RouteDecision<W> | undefined;
}

export const POLICY_NAMES = [
  "cache_aware",
  "round_robin",
  "random",
  "power_of_two",
  "least_load",
] as const;
export type PolicyName = (typeof POLICY_NAMES)[number];
