/** A worker as the peers' counts see it (workers/worker.ts Worker). */
export interface PeerCountedWorker {
  readonly id: string;
  setPeerInFlight(count: number): void;
}

/** Where a peer count comes from: this host's sibling processes, or replicas through Redis. */
export type PeerSource = "siblings" | "redis";

/**
 * A worker's `peerInFlight` is the sum of what two sources report when both are on
 * (radixgate-cluster with --state-url): its sibling processes over the local channel, and the
 * replicas on other hosts through Redis (which leave this host's siblings out, so nothing counts
 * twice). Each source sets its own part; the worker gets the sum.
 */
export class PeerInFlight {
  private readonly siblings = new Map<string, number>();
  private readonly redis = new Map<string, number>();

  set(source: PeerSource, worker: PeerCountedWorker, count: number): void {
    const part = source === "siblings" ? this.siblings : this.redis;
    if (count > 0) part.set(worker.id, count);
    else part.delete(worker.id);
    worker.setPeerInFlight((this.siblings.get(worker.id) ?? 0) + (this.redis.get(worker.id) ?? 0));
  }
}
