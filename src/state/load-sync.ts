import type { RedisLink } from "./redis-link.js";
import type { StateKeys } from "./state-keys.js";
import type { RejectReason } from "./state-op.js";
import type { StateSecret } from "./state-secret.js";

/** What load sharing needs of a worker: its id, the router's own count, and where peers' go. */
export interface LoadWorker {
  readonly id: string;
  readonly ownInFlight: number;
  /** The sum of the peers' counts for the worker (workers/worker.ts Worker.setPeerInFlight). */
  setPeerInFlight(count: number): void;
}

export interface LoadSyncOptions {
  replicaId: string;
  /** Replicas whose counts reach this one another way (radixgate-cluster's siblings): left out. */
  skipReplica?: (replicaId: string) => boolean;
  keys: StateKeys;
  /** --state-load-interval-ms */
  intervalMs: number;
  workers: () => readonly LoadWorker[];
  /** Signs this replica's counts; peers' counts without a valid signature are ignored. */
  secret: StateSecret;
  onRejected?: (reason: RejectReason) => void;
}

/** Longest load value read (a count per worker: far more workers than a fleet has). */
const MAX_LOAD_VALUE_CHARS = 65_536;

/**
 * Shares in-flight counts between replicas. Every interval, each replica writes its own count per
 * worker to a key of its own that expires after 3 intervals (SET PX), and reads its peers' keys;
 * the sum of the peers' counts becomes each worker's `peerInFlight`, so load terms see the
 * fleet-wide count (own exact, peers' as last published). A peer that stops publishing drops out
 * when its key expires; when Redis is away for longer than that, peers' counts fall to 0 and the
 * replica balances on its own counts alone.
 *
 * Each value is `<signature> <JSON>`, the signature over the JSON under the key's name, so counts
 * written by anyone without --state-secret (or moved to another replica's key) are ignored.
 */
export class LoadSync {
  private timer: NodeJS.Timeout | undefined;
  private busy = false;
  private lastRead = 0;
  private readonly ttlMs: number;

  constructor(
    private readonly link: RedisLink,
    private readonly options: LoadSyncOptions,
  ) {
    this.ttlMs = options.intervalMs * 3;
  }

  start(): void {
    if (this.timer !== undefined) return;
    this.timer = setInterval(() => void this.tick(), this.options.intervalMs);
    this.timer.unref();
  }

  /** One publish-and-read round (the timer's work; tests call it directly). */
  async tick(): Promise<void> {
    if (this.busy) return; // a slow Redis: skip rounds rather than overlap them
    this.busy = true;
    try {
      if (this.link.up && (await this.exchange())) this.lastRead = Date.now();
      else if (Date.now() - this.lastRead > this.ttlMs) this.forgetPeers();
    } finally {
      this.busy = false;
    }
  }

  private async exchange(): Promise<boolean> {
    const { keys, replicaId } = this.options;
    const own: Record<string, number> = {};
    for (const worker of this.options.workers()) {
      if (worker.ownInFlight > 0) own[worker.id] = worker.ownInFlight;
    }
    const key = keys.load(replicaId);
    const json = JSON.stringify(own);
    const value = `${this.options.secret.sign(key, [json])} ${json}`;
    const redis = this.link.commands;
    try {
      const results = await redis
        .pipeline()
        .set(key, value, "PX", this.ttlMs)
        .sadd(keys.replicas, replicaId)
        .smembers(keys.replicas)
        .exec();
      const members = results?.[2]?.[1];
      if (!Array.isArray(members)) return false;
      const skip = this.options.skipReplica;
      const peers = (members as string[]).filter((id) => id !== replicaId && skip?.(id) !== true);
      const totals = new Map<string, number>();
      if (peers.length > 0) {
        const loads = await redis.mget(peers.map((id) => keys.load(id)));
        const gone: string[] = [];
        loads.forEach((raw, i) => {
          const peer = peers[i] as string;
          if (raw === null) gone.push(peer);
          else this.addSigned(totals, keys.load(peer), raw);
        });
        if (gone.length > 0) void redis.srem(keys.replicas, ...gone).catch(() => {});
      }
      for (const worker of this.options.workers())
        worker.setPeerInFlight(totals.get(worker.id) ?? 0);
      return true;
    } catch {
      return false;
    }
  }

  /** Adds a peer's counts if its value is signed for its key; else counts the refusal. */
  private addSigned(totals: Map<string, number>, key: string, raw: string): void {
    const reason = this.refusal(key, raw);
    if (reason === undefined) addCounts(totals, raw.slice(raw.indexOf(" ") + 1));
    else this.options.onRejected?.(reason);
  }

  private refusal(key: string, raw: string): RejectReason | undefined {
    if (raw.length > MAX_LOAD_VALUE_CHARS) return "oversize";
    const space = raw.indexOf(" ");
    if (space < 0) return "unsigned";
    const signed = this.options.secret.verify(key, [raw.slice(space + 1)], raw.slice(0, space));
    return signed ? undefined : "bad_signature";
  }

  private forgetPeers(): void {
    for (const worker of this.options.workers()) worker.setPeerInFlight(0);
  }

  /** Stops publishing and removes this replica's count at once (best effort). */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    if (!this.link.up) return;
    const { keys, replicaId } = this.options;
    await this.link.commands
      .pipeline()
      .del(keys.load(replicaId))
      .srem(keys.replicas, replicaId)
      .exec()
      .catch(() => {});
  }
}

/** Adds a peer's published counts; ignores anything that is not {id: non-negative integer}. */
function addCounts(totals: Map<string, number>, raw: string): void {
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    return;
  }
  if (parsed === null || typeof parsed !== "object") return;
  for (const [id, n] of Object.entries(parsed as Record<string, unknown>)) {
    if (typeof n === "number" && Number.isInteger(n) && n > 0)
      totals.set(id, (totals.get(id) ?? 0) + n);
  }
}
