/**
 * Session affinity: which worker each conversation was last sent to, so its next turn goes there
 * while that worker is available. Bounded: past `maxSessions` the least recently used session is
 * forgotten (its next turn is routed as new, by the policy and the prefix index).
 *
 * A Map keeps insertion order, so deleting and re-inserting on use makes its first key the least
 * recently used: O(1) per request without a separate list.
 */
export class SessionTable {
  private readonly workers = new Map<string, string>();

  constructor(readonly maxSessions: number) {
    if (!Number.isInteger(maxSessions) || maxSessions < 1)
      throw new RangeError(`maxSessions must be a positive integer, got ${maxSessions}`);
  }

  /** The worker id this session was last routed to, if remembered. */
  workerFor(session: string): string | undefined {
    return this.workers.get(session);
  }

  /** Records (or refreshes) the session's worker. */
  bind(session: string, workerId: string): void {
    this.workers.delete(session);
    this.workers.set(session, workerId);
    if (this.workers.size > this.maxSessions) {
      const oldest = this.workers.keys().next().value;
      if (oldest !== undefined) this.workers.delete(oldest);
    }
  }

  get size(): number {
    return this.workers.size;
  }
}
