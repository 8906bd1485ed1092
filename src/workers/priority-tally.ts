/**
 * This router's requests in flight on one worker, counted by the priority the engine's scheduler
 * got for each (--engine-priority; the router's higher-first scale, after an over-share tenant
 * went lower: admission/admission.ts enginePriority). Admission reads it to let a request go
 * that outranks the work filling an engine (admission/outranking.ts). Bounded: one entry per
 * priority with a request in flight (each of [-100, 100], or that less the yield's depth); an
 * entry leaves at 0.
 */
export class PriorityTally {
  private readonly counts = new Map<number, number>();

  /** One request sent with `priority` started (+1) or ended (-1). */
  add(priority: number, delta: 1 | -1): void {
    const count = (this.counts.get(priority) ?? 0) + delta;
    if (count > 0) this.counts.set(priority, count);
    else this.counts.delete(priority);
  }

  /** Requests in flight that the engine got with a priority strictly below `priority`. */
  below(priority: number): number {
    let sum = 0;
    for (const [p, count] of this.counts) if (p < priority) sum += count;
    return sum;
  }

  /** The lowest priority with a request in flight; undefined when none is. */
  lowest(): number | undefined {
    let low: number | undefined;
    for (const p of this.counts.keys()) if (low === undefined || p < low) low = p;
    return low;
  }

  /** Requests per priority, highest first (GET /workers). */
  toJSON(): { priority: number; requests: number }[] {
    return [...this.counts]
      .sort(([a], [b]) => b - a)
      .map(([priority, requests]) => ({ priority, requests }));
  }

  get size(): number {
    return this.counts.size;
  }
}
