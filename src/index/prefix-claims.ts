/**
 * Agreement between router replicas on which worker takes a prefix none of them knows yet.
 *
 * Replicas share their decisions through the ops stream, but a decision takes a few milliseconds
 * to reach the peers: when the first requests of a new prefix (a tenant's first prompt, a new
 * system prompt) reach two replicas at once, each picks a worker by load, and the prefix ends up
 * cached twice. A claim closes that window: the first replica to claim a new prefix names its
 * worker, and a replica that claims the same prefix while the claim lives is told that worker.
 * The index seam owns the idea; its one implementation, over both of the replication's
 * transports, is state/prefix-claims.ts.
 */
export interface PrefixClaims {
  /**
   * Proposes `value` (the decider's: a worker and what it was sent) for the prefix named by `key`.
   * Resolves to the claim's value (this proposal, or an earlier one of any replica), or undefined
   * when no answer came in time; never rejects. Returns undefined at once when no claim can be made
   * now (no link), so the caller awaits nothing.
   */
  claim(key: string, value: string): Promise<string | undefined> | undefined;
}

/**
 * What a replica asks the replicas' one decider of new prefixes (--state-new-prefix leader): not
 * the prompt, only what a decision needs. `held[k]`: characters of the text worker `ids[k]` holds
 * as the asker's index sees it; `window`: the text's characters from `windowAt`, for the policy's
 * hashed tie-breaks (prefix-cost.ts), so every ask of one prefix hashes alike.
 */
export interface LeaderAsk {
  /** The prefix's name (scheduling/new-prefix-claim.ts newPrefixClaimKey). */
  readonly key: string;
  /** Where that prefix ends (newPrefixClaimEnd). */
  readonly end: number;
  /** The text's length. */
  readonly length: number;
  readonly model?: string | undefined;
  readonly ids: readonly string[];
  readonly held: readonly number[];
  readonly windowAt: number;
  readonly window: string;
  /** Digests of the text's prefixes (new-prefix-claim.ts prefixLadder): what two texts share. */
  readonly ladder: string;
}

/** The leader's answer: the worker, and the prefill its decision queues there (uncached characters). */
export interface LeaderGrant {
  readonly worker: string;
  readonly chars: number;
}

/**
 * One decider for new prefixes among replicas: the replica of rank 0 decides its own new prefixes
 * at once, and those the others ask of it, on its own view; it remembers each for a while, so
 * that a later request of the same prefix (its own or asked) knows where the prefix went. Its one
 * implementation is state/new-prefix-leader.ts.
 */
export interface NewPrefixLeader {
  /** "leader" (rank 0), "follower" (it can ask), or undefined (no leader known: claim). */
  role(): "leader" | "follower" | undefined;
  /**
   * Asks the leader; resolves to the worker it chose, or undefined when no answer came in time
   * (never rejects). Undefined at once when no ask can be made now.
   */
  ask(ask: LeaderAsk): Promise<string | undefined> | undefined;
  /** The leader's decision on a peer's ask (the scheduler's; undefined: let the asker decide). */
  serve(decide: (ask: LeaderAsk) => LeaderGrant | undefined): void;
  /** The worker the leader last gave the prefix `key`, and that text's ladder, while remembered. */
  granted(key: string): { readonly worker: string; readonly ladder: string } | undefined;
  /** The leader gave the prefix `key` of a text whose ladder is `ladder` to `worker`. */
  remember(key: string, worker: string, ladder: string): void;
}
