/**
 * A data-parallel engine keeps one KV cache per rank, so the precise index keeps one entry per
 * rank: rank 0 under the worker's own id, rank r under `<id>#dp<r>`.
 */
export function rankIndexId(workerId: string, rank: number): string {
  return rank === 0 ? workerId : `${workerId}#dp${rank}`;
}
