/**
 * A per-policy turn counter. Each call hands out a start index one position further than the last,
 * so a scan that keeps the first of several equal candidates picks a different one each time:
 * ties rotate instead of always landing on the first worker.
 *
 * Replicas behind one balancer each keep their own turn, and all start at 0: their first
 * decisions (every cost equal, nothing cached) went to the same worker, and so did every tie
 * they took in the same few milliseconds, before either's decision reached the other. A replica's
 * `rank` among its peers (RouteRequest.replicaRank, 0 alone) shifts its start by spreadOffset, so
 * that replicas taking ties at once take different workers; one router is unchanged.
 */
export class Rotation {
  // Kept below the last candidate count, so it never grows however long the router runs.
  private turn = 0;

  /** The index (in [0, n)) where the next scan of `n` > 0 candidates starts; advances the turn. */
  next(n: number, rank = 0): number {
    const turn = this.turn < n ? this.turn : this.turn % n;
    this.turn = turn + 1;
    if (rank === 0) return turn;
    const start = turn + spreadOffset(rank, n);
    return start >= n ? start - n : start;
  }
}

/**
 * Where replica `rank`'s turns start among `n` candidates: the rank-th distinct place of the van
 * der Corput sequence (0, 1/2, 1/4, 3/4, 1/8, ...) scaled to n and rounded down, so that the first
 * replicas are as far apart as n allows, a replica's offset does not move when others join, and
 * any n ranks take n different places. Scaling alone is distinct only for a power-of-two n (with 3
 * candidates, rank 2's 1/4 fell on rank 0's place 0), so places already taken are skipped.
 * Ranks past n wrap.
 */
export function spreadOffset(rank: number, n: number): number {
  if (n <= 1) return 0;
  const r = Math.max(0, Math.floor(rank)) % n;
  if (r === 0) return 0;
  const key = n * OFFSET_KEY_STRIDE + r;
  const known = offsets.get(key);
  if (known !== undefined) return known;
  const taken = new Set<number>();
  let place = 0;
  // Every place of [0, n) is reached by the first 2^ceil(log2 n) terms (steps of n / 2^k <= 1).
  for (let k = 0; taken.size <= r; k++) {
    place = Math.floor(vanDerCorput(k) * n);
    taken.add(place);
  }
  if (offsets.size >= MAX_OFFSETS) offsets.clear();
  offsets.set(key, place);
  return place;
}

/** The k-th term of the base-2 van der Corput sequence: k's bits mirrored after the point. */
function vanDerCorput(k: number): number {
  let fraction = 0;
  let unit = 0.5;
  for (let bits = k; bits > 0; bits = Math.floor(bits / 2)) {
    if (bits & 1) fraction += unit;
    unit /= 2;
  }
  return fraction;
}

/** Computed offsets by (n, rank): a decision asks for the same few again and again. */
const offsets = new Map<number, number>();
const OFFSET_KEY_STRIDE = 1 << 20;
const MAX_OFFSETS = 4096;

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

  /**
   * One pass over `candidates`: the index of the least-loaded one, or -1 when there are none.
   * `rank`: this router's among its replicas (Rotation.next).
   */
  scan(candidates: readonly Loaded[], rank = 0): number {
    const n = candidates.length;
    if (n === 0) return -1;
    const start = this.rotation.next(n, rank);
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
  pick<W extends Loaded>(candidates: readonly W[], rank = 0): W | undefined {
    const index = this.scan(candidates, rank);
    return index < 0 ? undefined : candidates[index];
  }
}
