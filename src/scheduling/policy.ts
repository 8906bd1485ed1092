/**
 * What a policy may see of a worker: its id and the router's own in-flight count for it. Policies
 * never see URLs, HTTP, health or prefix indexes: the caller passes only the candidates (healthy
 * workers whose breaker admits a request) and, for policies that use them, how much of the text
 * each candidate probably holds (see scheduling/scheduler.ts).
 */
export interface PolicyWorker {
  readonly id: string;
  /** In-flight requests fleet-wide: this router's own plus, with --state-url, its peers' as last read. */
  readonly inFlight: number;
  /**
   * The requests this router itself has in flight there, always exact and current (peers' counts
   * are up to --state-load-interval-ms old); equal to inFlight without shared state. Absent: inFlight.
   */
  readonly ownInFlight?: number | undefined;
  /**
   * Uncached characters of this worker's in-flight requests that have not yet produced a first
   * byte (prefill still queued or running), kept by the forwarder. Read by prefix_cost; 0 if absent.
   */
  readonly pendingPrefillChars?: number | undefined;
  /**
   * Characters of the engine's KV each running request holds beyond its routing text (its output,
   * its last partial block; workers/running-reserve.ts): the prefix index keeps that much room per
   * request in flight. 0 if absent.
   */
  readonly runningReserveChars?: number | undefined;
  /** How many in-flight requests pendingPrefillChars counts. */
  readonly pendingPrefillRequests?: number | undefined;
  /**
   * The same, queued there by the other replicas (--state-url, radixgate-cluster): their load
   * reports and their decisions since (state/peer-pending.ts). 0 if absent.
   */
  readonly peerPendingPrefillChars?: number | undefined;
  /** How many requests peerPendingPrefillChars counts. */
  readonly peerPendingPrefillRequests?: number | undefined;
  /**
   * Of pendingPrefillChars, what a request the engine serves at `priority` finds ahead of it when
   * it comes before all of them: the prefill under way (workers/worker-load.ts prefillAheadOf);
   * undefined when some of them is not below it. Absent: pendingPrefillChars.
   */
  prefillAheadOf?(priority: number, now: number): number | undefined;
  /**
   * Requests in the engine's own queue that this router did not send (its report's queue minus the
   * router's requests pending there at the report), when the report is still fresh at `now` (epoch
   * ms; src/workers/worker.ts). A policy reads the clock once per decision and passes it to every
   * candidate, so one decision judges every report against the same instant.
   */
  foreignQueuedAt?(now: number): number | undefined;
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
  | "least_load"
  | "lowest_cost" // prefix_cost: lowest estimated prefill work ahead of the first token
  | "session" // --session-affinity: the worker this conversation was last sent to
  | "peer_claim" // --state-url: another replica claimed this new prefix first; its worker taken
  // Scheduling profiles (src/scheduling/): the picker's outcome.
  | "max_score" // the one highest weighted score
  | "max_score_tie" // several shared the highest score; ties take turns
  | "weighted_random" // drawn with probability proportional to the score
  | "softmax" // drawn from a softmax of the scores at a temperature
  | "prefix_match" // aibrix_prefix: the best-matching pod under mean + k·σ running requests
  | "least_request" // aibrix_prefix: no pod matched (or all were over the bound): least running
  | "ring_home" // chwbl: the key's own endpoint on the ring
  | "ring_walk" // chwbl: walked past endpoints over the load bound
  | "ring_default" // chwbl: every endpoint over the bound: the first that serves the adapter
  | "target_worker" // consistent_hashing: the worker x-smg-target-worker named
  | "key_assigned"; // manual: a routing key new (or whose workers left) given a worker

/** HTTP request headers as Node gives them (lower-case names). */
export type RequestHeaders = Readonly<Record<string, string | string[] | undefined>>;

export interface RouteRequest {
  /** The text the engine will prefill (see intake/routing-text.ts). May be empty. */
  readonly text: string;
  /** The requested model, when the body names one. */
  readonly model?: string | undefined;
  /**
   * matched[i] = leading characters of `text` that candidates[i] probably holds, from the prefix
   * index. Given to policies whose `usesPrefixes` is true; absent (all zero) otherwise.
   */
  readonly matched?: readonly number[] | undefined;
  /**
   * fill[i] = how full candidates[i]'s cache is, as the prefix index sees it (0 to 1; 0 when the
   * index does not know its capacity). Given with `matched`.
   */
  readonly fill?: readonly number[] | undefined;
  /** The model the client named (not the index key); for the model filter and LoRA affinity. */
  readonly requested?: string | undefined;
  /** SGLang's lora_path adapter, when the request carries one. */
  readonly adapter?: string | undefined;
  /** The conversation's key (--session-affinity), for pickers that keep their own (manual). */
  readonly session?: string | undefined;
  /** The request's headers, for pickers routed by one (SGLang's x-smg-routing-key). */
  readonly headers?: RequestHeaders | undefined;
  /**
   * The worker this conversation was last sent to (--session-affinity): a profile with a
   * session-affinity-scorer weighs it, any other keeps the conversation there (profile.ts).
   */
  readonly sessionWorker?: string | undefined;
  /**
   * This router's rank among the replicas it shares state with (0 alone, or first): rotations of
   * equal candidates start at a place of their own per replica (rotation.ts Rotation.next).
   */
  readonly replicaRank?: number | undefined;
  /**
   * Prefill another replica's decision queued on candidates[index], known from its claim on a new
   * prefix (scheduler.ts decideAgreed) before its op or load report reached this one: counted as
   * one more request queued there with `chars` uncached characters.
   */
  readonly claimed?: { readonly index: number; readonly chars: number } | undefined;
  /**
   * The priority the engines' schedulers get with it (--engine-priority; the router's higher-first
   * scale); undefined when they get none.
   */
  readonly priority?: number | undefined;
}

export interface RouteDecision<W extends PolicyWorker> {
  readonly worker: W;
  readonly branch: RouteBranch;
  /** matched characters / text characters for the chosen worker; null when the policy does not look at prefixes. */
  readonly matchRate: number | null;
}

export interface Policy {
  /** A PolicyName, or a profile's name from --scheduler-config. */
  readonly name: string;
  /** True when the policy reads `matched`: the decider then asks the index and inserts the text. */
  readonly usesPrefixes: boolean;
  /** Pick one of `candidates`, or undefined when there are none. Never returns a non-candidate. */
  select<W extends PolicyWorker>(
    candidates: readonly W[],
    request: RouteRequest,
  ): RouteDecision<W> | undefined;
  /**
   * For a policy that picks the lowest of a per-worker cost (prefix_cost): that cost, for one
   * worker holding `matched` characters of a `length`-character text, judged at `now`, its cache
   * `fill` full (RouteRequest.fill; default 0). Shown by POST /debug/route; select uses the same
   * function.
   */
  cost?(worker: PolicyWorker, matched: number, length: number, now: number, fill?: number): number;
  /**
   * True when the policy weighs session affinity itself (a profile with a session-affinity
   * scorer): the decider then passes `sessionWorker` instead of pinning the session's worker.
   */
  readonly handlesSessions?: boolean;
  /**
   * The prefix index the policy is defined over, when it brings its own (the GIE and AIBrix
   * profiles: block hashes of their block size); the router then builds it instead of
   * --prefix-index's.
   */
  readonly prefixIndex?: { readonly name: "block_hash"; readonly blockChars: number };
  /**
   * After the last `select`: whether a filter removed candidates[i] (a scheduling profile's
   * filters), for the cache account's routing-loss reason (scheduling/loss-reason.ts).
   */
  filteredOut?(i: number): boolean;
  /**
   * False when x-radixgate-route does not name the profile: the router's own policies, whose
   * branches (cache_hit, lowest_cost, round_robin, ...) already say which rule decided.
   */
  readonly labelsRoute?: boolean;
  /** A scheduling profile: every plugin's verdict per candidate, for POST /debug/route. */
  explain?(candidates: readonly PolicyWorker[], request: RouteRequest): ProfileExplanation;
}

/** One candidate as a scheduling profile saw it. */
export interface CandidateExplanation {
  /** The filter that removed it, or null. */
  readonly filteredBy: string | null;
  /** Each scorer's score and weight (by plugin name); empty when filtered. */
  readonly scores: Record<string, { score: number; weight: number }>;
  /** The weighted sum the picker saw; null when filtered. */
  readonly total: number | null;
}

export interface ProfileExplanation {
  readonly profile: string;
  readonly picker: string;
  /** Filters that would have removed every candidate and were undone (fail-open). */
  readonly failedOpen: readonly string[];
  readonly candidates: readonly CandidateExplanation[];
}

export const POLICY_NAMES = [
  "cache_aware",
  "round_robin",
  "random",
  "power_of_two",
  "least_load",
  "prefix_cost",
  // The seed systems' algorithms as scheduling profiles (src/scheduling/builtin-profiles.ts).
  "aibrix_prefix",
  "llmd_approx",
  "precise_weighted",
  "chwbl",
  "dynamo_cost",
  // SGLang's keyed policies (src/scheduling/key-pickers.ts).
  "prefix_hash",
  "consistent_hashing",
  "manual",
] as const;
export type PolicyName = (typeof POLICY_NAMES)[number];

/** Uncached prefill queued on the worker by every replica: this router's and its peers'. */
export function queuedPrefillChars(worker: PolicyWorker): number {
  return Math.max(0, worker.pendingPrefillChars ?? 0) + (worker.peerPendingPrefillChars ?? 0);
}

/**
 * Uncached prefill ahead of a request of `priority` on the worker: queuedPrefillChars, less the
 * part of this router's own that its engine serves after it (PolicyWorker.prefillAheadOf).
 */
export function prefillAhead(
  worker: PolicyWorker,
  priority: number | undefined,
  now: number,
): number {
  const own = priority === undefined ? undefined : worker.prefillAheadOf?.(priority, now);
  return own === undefined
    ? queuedPrefillChars(worker)
    : own + (worker.peerPendingPrefillChars ?? 0);
}

/** How many requests queuedPrefillChars adds up. */
export function queuedPrefillRequests(worker: PolicyWorker): number {
  return (worker.pendingPrefillRequests ?? 0) + (worker.peerPendingPrefillRequests ?? 0);
}
