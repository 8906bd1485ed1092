/** A simulated worker's counters and what GET /_sim/stats (and SimWorker.stats()) make of them. */
import type { SimRank } from "./dp-ranks.js";
import type { ServeCounters } from "./serve.js";
import type { SimStats } from "./sim-worker.js";

/** The serve loop's counters (serve.ts) and the ones only the HTTP side keeps. */
export type WorkerCounters = ServeCounters & {
  requests: number;
  failed: number;
  rejected: number;
  unauthorized: number;
};

/** Every counter at zero, as a worker starts. */
export function newWorkerCounters(): WorkerCounters {
  return {
    requests: 0,
    completed: 0,
    aborted: 0,
    crashed: 0,
    failed: 0,
    rejected: 0,
    unauthorized: 0,
    promptTokens: 0,
    cachedTokens: 0,
    completionTokens: 0,
  };
}

export function collectStats(
  id: string,
  c: WorkerCounters,
  ranks: readonly SimRank[],
  hanging: number,
  endpoints: Readonly<Record<string, number>>,
  lastTrace: { traceparent?: string | undefined; tracestate?: string | undefined },
  lastPriority: number | undefined,
): SimStats {
  return {
    id: id,
    requests: c.requests,
    inFlight: sum(ranks, (r) => r.engine.running + r.engine.waiting) + hanging,
    running: sum(ranks, (r) => r.engine.running),
    waiting: sum(ranks, (r) => r.engine.waiting),
    hanging: hanging,
    completed: c.completed,
    aborted: c.aborted,
    crashed: c.crashed,
    failed: c.failed,
    rejected: c.rejected,
    unauthorized: c.unauthorized,
    promptTokens: c.promptTokens,
    cachedTokens: c.cachedTokens,
    completionTokens: c.completionTokens,
    kvUsage: sum(ranks, (r) => r.kv.activeUsage) / ranks.length,
    kvEvictions: sum(ranks, (r) => r.kv.evictions),
    endpoints: { ...endpoints },
    lastTraceparent: lastTrace.traceparent,
    lastTracestate: lastTrace.tracestate,
    lastPriority,
  };
}

function sum(ranks: readonly SimRank[], of: (rank: SimRank) => number): number {
  let total = 0;
  for (const rank of ranks) total += of(rank);
  return total;
}
