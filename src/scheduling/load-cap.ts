import type { PolicyWorker } from "./policy.js";

/**
 * The load a load cap weighs: this router's own in-flight count. With replicas sharing
 * --state-url, peers' counts arrive every --state-load-interval-ms, and a cap as tight as the
 * default (two workers sharing a hot prefix must stay within about 2 requests of each other) then
 * trips on counts hundreds of milliseconds old: every replica diverts the same prefixes at once,
 * conversations split across workers and evict each other (bench:routing cache-pressure with 4
 * replicas lost 7 points). Own counts are exact; when each replica keeps its own share within
 * bound × its own mean + 1, the fleet stays within bound × the fleet's mean + the number of
 * replicas. One router: its own count is the whole count, nothing changes.
 */
export function ownLoad(worker: PolicyWorker): number {
  return worker.ownInFlight ?? worker.inFlight;
}

/**
 * The most own in-flight requests a worker may have and still win on its prefix (--cache-load-bound):
 * `bound` × the mean own in-flight of the candidates + 1; unbounded when `bound` is 0. Some
 * candidate is always within it (the least loaded is at most the mean).
 */
export function loadCap(candidates: readonly PolicyWorker[], bound: number): number {
  if (bound === 0 || candidates.length === 0) return Number.POSITIVE_INFINITY;
  let total = 0;
  for (const worker of candidates) total += ownLoad(worker);
  return bound * (total / candidates.length) + 1;
}
