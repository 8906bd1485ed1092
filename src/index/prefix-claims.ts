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
