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
