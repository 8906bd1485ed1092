/**
 * A per-policy turn counter. Each call hands out a start index one position further than the last,
 * so a scan that keeps the first of several equal candidates picks a different one each time:
 * ties rotate instead of always landing on the first worker.
 */
export class Rotation {
  // Kept below the last candidate count, so it never grows however long the router runs.
  private turn = 0;

  /** The index (in [0, n)) where the next scan of `n` > 0 candidates starts; advances the turn. */
  next(n: number): number {
    const start = this.turn < n ? this.turn : this.turn % n;
    this.turn = start + 1;
    return start;
  }
}

/** The only thing this helper reads of a worker: the router's own in-flight count for it. */
export interface Loaded {
  readonly inFlight: number;
}

/**
 * "Least loaded, ties broken in rotation", the one implementation shared by the cache-aware,
 * least-load and AIBrix pickers. Each scan starts one position further than the previous (see Rotation) and keeps the
 * first candidate with the minimal in-flight count, so equally loaded workers take turns.
 *
 * A scan also records where it started and the min/max load it saw: cache_aware's imbalance gate
 * needs exactly those, and its own prefix pass reuses the start so its ties rotate the same way.
 * Only numbers are kept between calls, never a worker.
 */
export class LeastLoaded {
  private readonly rotation = new Rotation();
  private lastStart = 0;
  private lastMin = 0;
  private lastMax = 0;
  private lastTotal = 0;

  /** Index where the last scan started. */
  get start(): number {
    return this.lastStart;
  }

  /** Smallest in-flight count seen by the last scan. */
  get min(): number {
    return this.lastMin;
  }

  /** Largest in-flight count seen by the last scan. */
  get max(): number {
    return this.lastMax;
  }

  /** Sum of the in-flight counts seen by the last scan. */
  get total(): number {
    return this.lastTotal;
  }

  /** One pass over `candidates`: the index of the least-loaded one, or -1 when there are none. */
  scan(candidates: readonly Loaded[]): number {
    const n = candidates.length;
    if (n === 0) return -1;
    const start = this.rotation.next(n);
    let best = start;
    let min = candidates[start]!.inFlight;
    let max = min;
    let total = min;
    for (let i = 1; i < n; i++) {
      let index = start + i;
      if (index >= n) index -= n;
      const load = candidates[index]!.inFlight;
      total += load;
      // Strictly less: among equal loads the first in rotated order wins.
      if (load < min) {
        min = load;
        best = index;
      } else if (load > max) {
        max = load;
      }
    }
    this.lastStart = start;
    this.lastMin = min;
    this.lastMax = max;
    this.lastTotal = total;
    return best;
  }

  /** The least-loaded candidate, or undefined when there are none. */
  pick<W extends Loaded>(candidates: readonly W[]): W | undefined {
    const index = this.scan(candidates);
    return index < 0 ? undefined : candidates[index];
  }
}
