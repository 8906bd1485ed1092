import type { OpStamp, RejectReason } from "./state-op.js";

/** Writers remembered at most (replica ids are new at every start; the oldest is forgotten). */
const MAX_WRITERS = 4096;

/**
 * Refuses signed entries written again (a captured op XADDed after the change it made was undone,
 * or an old workers-hash value put back). A signature proves who wrote an entry, not when, so
 * every op carries its writer's sequence number and the time it was signed (OpStamp):
 *
 * - from a writer it knows, an op must come after the last one applied (`replayed` otherwise);
 * - from a writer it does not know (a replica that just started, or a writer long gone), a
 *   membership op must be younger than `maxAgeMs` (`stale` otherwise): a starting replica gets the
 *   current set from the workers hash, whose values are signed again while a replica keeps the
 *   worker (so they too are refused once older than that). An old decision is still applied (it
 *   is what a starting replica replays), without vouching for its writer.
 *
 * What it cannot refuse: an op written again within `maxAgeMs`, read by a replica that has not
 * seen its writer since it started and whose original was trimmed from the stream.
 */
export class OpOrder {
  private readonly writers = new Map<string, number>();

  constructor(
    private readonly maxAgeMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Whether to apply an op of `writer` with `stamp` (and remember it), or why not. */
  admit(writer: string, stamp: OpStamp, membership: boolean): RejectReason | undefined {
    const last = this.writers.get(writer);
    if (last !== undefined) {
      if (stamp.seq <= last) return "replayed";
    } else if (!this.fresh(stamp.at)) {
      return membership ? "stale" : undefined;
    }
    // Moved to the end: the least recently heard writer is the one forgotten.
    this.writers.delete(writer);
    this.writers.set(writer, stamp.seq);
    if (this.writers.size > MAX_WRITERS) {
      const oldest = this.writers.keys().next().value as string;
      this.writers.delete(oldest);
    }
    return undefined;
  }

  /** Whether `at` (epoch ms, the writer's clock) is within `maxAgeMs` of this replica's clock. */
  fresh(at: number): boolean {
    return Math.abs(this.now() - at) <= this.maxAgeMs;
  }
}
