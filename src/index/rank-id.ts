/**
 * A data-parallel engine keeps one KV cache per rank, so the precise index keeps one entry per
 * rank: rank 0 under the worker's own id, rank r under `<id>#dp<r>`.
 */
export function rankIndexId(workerId: string, rank: number): string {
  return rank === 0 ? workerId : `${workerId}#dp${rank}`;
}

/**
 * The rank a request should go to among `ranks`: the one holding the most of it, ties to the
 * least loaded (lowest rank when equal). `held(rank)` and `load(rank)` are read once per rank;
 * `load` only when there are several ranks.
 */
export function bestRank(
  ranks: number,
  held: (rank: number) => number,
  load: (rank: number) => number,
): { rank: number; held: number } {
  let best = -1;
  let bestRank = 0;
  let bestLoad = Number.POSITIVE_INFINITY;
  for (let rank = 0; rank < ranks; rank++) {
    const h = held(rank);
    if (h < best) continue;
    const l = ranks > 1 ? load(rank) : 0;
    if (h > best || l < bestLoad) {
      best = h;
      bestRank = rank;
      bestLoad = l;
    }
  }
  return { rank: bestRank, held: best };
}
