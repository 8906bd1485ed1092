/** A worker as peers' queued prefill sees it (workers/worker.ts Worker). */
export interface PeerPendingWorker {
  setPeerPendingPrefill(chars: number, requests: number): void;
}

/** One peer's queued prefill on one worker: characters and how many requests they add up. */
export interface PendingLoad {
  readonly chars: number;
  readonly requests: number;
}

/** Worker ids read from one report at most, and the longest id kept (a peer's report is input). */
const MAX_REPORTED_WORKERS = 65_536;
const MAX_WORKER_ID_CHARS = 4096;

/**
 * A peer's queued prefill as its report carries it over either transport (`{worker id: [chars,
 * requests]}`): each pair of positive integers handed to `keep`, anything else skipped, bounded.
 */
export function readPendingPairs(
  raw: unknown,
  keep: (worker: string, chars: number, requests: number) => void,
): void {
  if (raw === null || typeof raw !== "object") return;
  let n = 0;
  for (const [id, pair] of Object.entries(raw as Record<string, unknown>)) {
    if (++n > MAX_REPORTED_WORKERS) break;
    if (id.length > MAX_WORKER_ID_CHARS || !Array.isArray(pair) || pair.length !== 2) continue;
    const [chars, requests] = pair as unknown[];
    if (positive(chars) && positive(requests)) keep(id, chars, requests);
  }
}

const positive = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) > 0;

/** A peer's decision not yet covered by one of its load reports. */
interface Entry {
  readonly worker: string;
  readonly chars: number;
  /** The peer's sequence number of the op (Redis), or 0 when the channel keeps order. */
  readonly seq: number;
  /** When it arrived here (epoch ms): past the peer's TTL it no longer counts. */
  readonly at: number;
}

interface Peer {
  reported: Map<string, PendingLoad>;
  entries: Entry[];
  ttlMs: number;
}

/** Decisions of one peer counted at once; past it the oldest are dropped (a report comes first). */
const MAX_ENTRIES_PER_PEER = 1024;
/** Peers tracked at once (replicas of one fleet: far fewer). */
const MAX_PEERS = 1024;

/**
 * The prefill other replicas queued on each worker, as this replica counts it, so that each
 * replica's prefix_cost sees the fleet's queue as one router sees its own (without it, replicas
 * behind random spreading all sent their new tenants to the worker the preamble's tie-break named:
 * each saw only the prefill it had queued itself).
 *
 * Two sources, per peer:
 * - its load reports (Redis load sync every --state-load-interval-ms; the cluster's channel when
 *   they change): its own pending prefill per worker, which drops when a request's first byte
 *   comes back;
 * - its decisions (insert ops carry the uncached characters), counted at once, from the moment
 *   they arrive until a report of that peer covers them: over Redis one whose sequence number is
 *   at or past the op's (both are the peer's own), over the cluster's ordered channel the next one.
 * A peer's decisions not covered within its TTL (its report lost, or a decision that never took a
 * lease) stop counting, and so does everything of a peer that is gone. Bounded: at most
 * MAX_ENTRIES_PER_PEER decisions per peer, MAX_PEERS peers.
 */
export class PeerPending {
  private readonly peers = new Map<string, Peer>();

  constructor(private readonly workerOf: (id: string) => PeerPendingWorker | undefined) {}

  /** A peer's decision queued `chars` of prefill on `worker`. */
  decided(peer: string, ttlMs: number, worker: string, chars: number, seq = 0, now = Date.now()) {
    if (chars <= 0) return;
    const p = this.peer(peer, ttlMs);
    if (p === undefined) return;
    const touched = this.dropExpired(p, now);
    p.entries.push({ worker, chars, seq, at: now });
    if (p.entries.length > MAX_ENTRIES_PER_PEER) touched.add(p.entries.shift()!.worker);
    touched.add(worker);
    this.apply(touched);
  }

  /**
   * A peer's load report: its pending prefill per worker, covering its decisions up to sequence
   * number `covers` (undefined: every decision received from it so far).
   */
  reported(
    peer: string,
    ttlMs: number,
    pending: ReadonlyMap<string, PendingLoad>,
    covers?: number,
    now = Date.now(),
  ): void {
    const p = this.peer(peer, ttlMs);
    if (p === undefined) return;
    const touched = this.dropExpired(p, now);
    for (const id of p.reported.keys()) touched.add(id);
    for (const id of pending.keys()) touched.add(id);
    p.reported = new Map(pending);
    const kept: Entry[] = [];
    for (const e of p.entries) {
      if (covers !== undefined && e.seq > covers) kept.push(e);
      else touched.add(e.worker);
    }
    p.entries = kept;
    this.apply(touched);
  }

  /** A peer is gone (stopped, its key expired, the link to it down): nothing of it counts. */
  gone(peer: string): void {
    const p = this.peers.get(peer);
    if (p === undefined) return;
    this.peers.delete(peer);
    const touched = new Set<string>(p.reported.keys());
    for (const e of p.entries) touched.add(e.worker);
    this.apply(touched);
  }

  /** Every peer whose name starts with `prefix` is gone (one transport's, when it loses them). */
  goneAll(prefix: string): void {
    for (const peer of [...this.peers.keys()]) if (peer.startsWith(prefix)) this.gone(peer);
  }

  /** Drops every peer's decisions past its TTL (the transports' timers call it). */
  expire(now = Date.now()): void {
    const touched = new Set<string>();
    for (const p of this.peers.values()) for (const id of this.dropExpired(p, now)) touched.add(id);
    if (touched.size > 0) this.apply(touched);
  }

  /** The workers' counts again, after a worker was added (counts heard for it apply now). */
  refresh(id: string): void {
    this.apply(new Set([id]));
  }

  /** What every peer has queued on `worker`, as counted now. */
  total(worker: string): PendingLoad {
    let chars = 0;
    let requests = 0;
    for (const p of this.peers.values()) {
      const r = p.reported.get(worker);
      if (r !== undefined) {
        chars += r.chars;
        requests += r.requests;
      }
      for (const e of p.entries) {
        if (e.worker !== worker) continue;
        chars += e.chars;
        requests += 1;
      }
    }
    return { chars, requests };
  }

  private peer(name: string, ttlMs: number): Peer | undefined {
    let p = this.peers.get(name);
    if (p === undefined) {
      if (this.peers.size >= MAX_PEERS) return undefined;
      p = { reported: new Map(), entries: [], ttlMs };
      this.peers.set(name, p);
    }
    return p;
  }

  /** Drops the peer's decisions past its TTL; returns the workers whose count changed. */
  private dropExpired(p: Peer, now: number): Set<string> {
    const touched = new Set<string>();
    let drop = 0;
    while (drop < p.entries.length && now - p.entries[drop]!.at > p.ttlMs) {
      touched.add(p.entries[drop]!.worker);
      drop += 1;
    }
    if (drop > 0) p.entries.splice(0, drop);
    return touched;
  }

  private apply(ids: Iterable<string>): void {
    for (const id of ids) {
      const worker = this.workerOf(id);
      if (worker === undefined) continue;
      const { chars, requests } = this.total(id);
      worker.setPeerPendingPrefill(chars, requests);
    }
  }
}
