import { parseAdvertisedUrl } from "./advertised-url.js";
import { type PeerPending, type PendingLoad, readPendingPairs } from "./peer-pending.js";
import type { RedisLink } from "./redis-link.js";
import type { StateKeys } from "./state-keys.js";
import { lastSeqSent, type RejectReason } from "./state-op.js";
import type { StateSecret } from "./state-secret.js";

/** What load sharing needs of a worker: its id, the router's own count, and where peers' go. */
export interface LoadWorker {
  readonly id: string;
  readonly ownInFlight: number;
  /** The router's own queued prefill there (Worker.pendingPrefillChars) and its requests. */
  readonly ownPendingChars?: number;
  readonly ownPendingRequests?: number;
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
  /** Where peers' queued prefill goes (their reports here, their decisions with their ops). */
  pending?: PeerPending;
  /** A replica's name among the peers that `pending` counts. */
  peerName?: (replicaId: string) => string;
  /** When this replica started (epoch ms; default: when the LoadSync was made): its rank's key. */
  startedAt?: number;
  /** Where peers reach this replica over HTTP (--state-advertise-url), published with its load. */
  advertiseUrl?: string | undefined;
}

/** The first-started live replica (rank 0), as the last exchange saw it. */
export interface LeaderView {
  /** This replica leads. */
  readonly self: boolean;
  /** Where the leader says peers reach it (its advertised URL); undefined when it says none. */
  readonly url: string | undefined;
  /** This replica and the leader both advertise a URL: new prefixes are relayed to the leader. */
  readonly relaying: boolean;
}

/** This replica is the leader its peers relay to: it decides for them (and claims nothing). */
export function leadsPeers(view: LeaderView | undefined): boolean {
  return view?.self === true && view.relaying;
}

/** A load key lives this many intervals: a replica that stops publishing drops out after it. */
const TTL_INTERVALS = 3;
/**
 * And never less: at a short interval, a replica whose event loop stalls for a few hundred ms
 * (a large body parsed, a GC pause) would otherwise drop out, and the rank and the leader move.
 */
const MIN_TTL_MS = 750;

/** How long a replica's load value lives at --state-load-interval-ms `intervalMs`. */
export function loadTtlMs(intervalMs: number): number {
  return Math.max(intervalMs * TTL_INTERVALS, MIN_TTL_MS);
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
 *
 * Each value also carries when its replica started: a replica's rank is the number of live
 * replicas (the cluster's siblings included) that started before it (ties: by id), so every
 * replica sees the same order, and a replica's rank never grows while it runs.
 */
export class LoadSync {
  private timer: NodeJS.Timeout | undefined;
  private busy = false;
  private lastRead = 0;
  /** Peers whose load was read in the last exchange: one missing from the next is gone. */
  private heard = new Set<string>();
  private readonly ttlMs: number;
  private readonly startedAt: number;
  /** This replica's rank as of the last exchange; undefined before the first. */
  rank: number | undefined;
  /** The leader as of the last exchange; undefined before the first. */
  leader: LeaderView | undefined;
  /** --state-advertise-url, or the URL a test or bench learned after listening (advertise). */
  private advertiseUrl: string | undefined;

  constructor(
    private readonly link: RedisLink,
    private readonly options: LoadSyncOptions,
  ) {
    this.ttlMs = loadTtlMs(options.intervalMs);
    this.startedAt = options.startedAt ?? Date.now();
    this.advertiseUrl = options.advertiseUrl;
  }

  /** Publishes `url` as where peers reach this replica, from the next exchange on. */
  advertise(url: string): void {
    this.advertiseUrl = url;
  }

  /** Publishes at once (peers learn this replica, and it its rank, before it serves), then every interval. */
  start(): void {
    if (this.timer !== undefined) return;
    this.timer = setInterval(() => void this.tick(), this.options.intervalMs);
    this.timer.unref();
    void this.tick();
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
    const own: Record<string, number | string | Record<string, PendingPair>> = {};
    const pending: Record<string, PendingPair> = {};
    for (const worker of this.options.workers()) {
      if (worker.ownInFlight > 0) own[worker.id] = worker.ownInFlight;
      const chars = worker.ownPendingChars ?? 0;
      if (chars > 0) pending[worker.id] = [chars, worker.ownPendingRequests ?? 1];
    }
    // Under keys no worker id has (ids are hex): the queued prefill, and the last op it covers.
    own[PENDING_KEY] = pending;
    own[COVERS_KEY] = lastSeqSent();
    own[SINCE_KEY] = this.startedAt;
    if (this.advertiseUrl !== undefined) own[URL_KEY] = this.advertiseUrl;
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
      // Every other replica is read for the rank; the skipped ones' counts are not added.
      const others = (members as string[]).filter((id) => id !== replicaId);
      const peers = others.filter((id) => skip?.(id) !== true);
      const totals = new Map<string, number>();
      let rank = 0;
      // The earliest started so far (this replica, until a peer started before it).
      const own = this.advertiseUrl;
      let leader: LeaderView = { self: true, url: own, relaying: own !== undefined };
      let leaderSince = this.startedAt;
      let leaderId = replicaId;
      if (others.length > 0) {
        const loads = await redis.mget(others.map((id) => keys.load(id)));
        const gone: string[] = [];
        loads.forEach((raw, i) => {
          const peer = others[i] as string;
          const counted = skip?.(peer) !== true;
          if (raw === null) {
            gone.push(peer);
            if (counted) this.peerGone(peer);
            return;
          }
          const parsed = this.readSigned(keys.load(peer), raw);
          if (parsed === undefined) return;
          const since = parsed[SINCE_KEY];
          if (startedBefore(since, peer, this.startedAt, replicaId)) rank++;
          if (startedBefore(since, peer, leaderSince, leaderId)) {
            leaderSince = since as number;
            leaderId = peer;
            const url = advertisedUrl(parsed[URL_KEY]);
            leader = { self: false, url, relaying: own !== undefined && url !== undefined };
          }
          if (counted) this.add(totals, parsed, peer);
        });
        if (gone.length > 0) void redis.srem(keys.replicas, ...gone).catch(() => {});
      }
      this.rank = rank;
      this.leader = leader;
      for (const worker of this.options.workers())
        worker.setPeerInFlight(totals.get(worker.id) ?? 0);
      const heard = new Set(peers);
      for (const peer of this.heard) if (!heard.has(peer)) this.peerGone(peer);
      this.heard = heard;
      this.options.pending?.expire();
      return true;
    } catch {
      return false;
    }
  }

  /** A peer's value, parsed, if it is signed for its key; else counts the refusal. */
  private readSigned(key: string, raw: string): Record<string, unknown> | undefined {
    const reason = this.refusal(key, raw);
    if (reason !== undefined) {
      this.options.onRejected?.(reason);
      return undefined;
    }
    return parseLoad(raw.slice(raw.indexOf(" ") + 1));
  }

  /** Adds a peer's counts, and passes on its queued prefill. */
  private add(totals: Map<string, number>, parsed: Record<string, unknown>, peer: string): void {
    addCounts(totals, parsed);
    const { pending, peerName } = this.options;
    if (pending === undefined || peerName === undefined) return;
    const covers = parsed[COVERS_KEY];
    pending.reported(
      peerName(peer),
      this.ttlMs,
      pendingOf(parsed[PENDING_KEY]),
      typeof covers === "number" && Number.isSafeInteger(covers) ? covers : 0,
    );
  }

  private peerGone(peer: string): void {
    const { pending, peerName } = this.options;
    if (pending !== undefined && peerName !== undefined) pending.gone(peerName(peer));
  }

  private refusal(key: string, raw: string): RejectReason | undefined {
    if (raw.length > MAX_LOAD_VALUE_CHARS) return "oversize";
    const space = raw.indexOf(" ");
    if (space < 0) return "unsigned";
    const signed = this.options.secret.verify(key, [raw.slice(space + 1)], raw.slice(0, space));
    return signed ? undefined : "bad_signature";
  }

  private forgetPeers(): void {
    // Nobody is known to lead: no relaying until the next exchange.
    this.leader = undefined;
    for (const worker of this.options.workers()) worker.setPeerInFlight(0);
    this.heard.clear();
    const { pending, peerName } = this.options;
    if (pending !== undefined && peerName !== undefined) pending.goneAll(peerName(""));
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

/** Characters and requests of queued prefill, as a load value carries them. */
type PendingPair = [number, number];
/** A load value's queued prefill per worker, and the sequence number of the last op it covers. */
const PENDING_KEY = "~p";
const COVERS_KEY = "~q";
/** When the replica started (epoch ms): its rank among the replicas. */
const SINCE_KEY = "~s";
/** Where peers reach the replica over HTTP (--state-advertise-url). */
const URL_KEY = "~u";

/** Longest advertised URL taken from a peer's value. */
const MAX_URL_CHARS = 2048;

/**
 * A peer's advertised URL when it passes the setting's own check; anything else reads as none, so
 * a replica never relays to what it cannot trust the shape of. The value is signed, so only a
 * holder of --state-secret can name it.
 */
function advertisedUrl(raw: unknown): string | undefined {
  if (typeof raw !== "string" || raw.length > MAX_URL_CHARS) return undefined;
  const parsed = parseAdvertisedUrl(raw);
  return "origin" in parsed ? parsed.origin : undefined;
}

/** A load value's JSON, or undefined when it is not an object. */
function parseLoad(raw: string): Record<string, unknown> | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    return undefined;
  }
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) return undefined;
  return parsed as Record<string, unknown>;
}

/**
 * Adds a peer's published counts (ignores anything that is not {id: non-negative integer}, and
 * the keys starting with "~").
 */
function addCounts(totals: Map<string, number>, value: Record<string, unknown>): void {
  for (const [id, n] of Object.entries(value)) {
    if (id.startsWith("~")) continue;
    if (typeof n === "number" && Number.isInteger(n) && n > 0)
      totals.set(id, (totals.get(id) ?? 0) + n);
  }
}

/**
 * Whether the peer `peer`, started at `since` (its value's; anything but a finite number reads
 * as never: it ranks after every replica that says when it started), started before this replica.
 */
function startedBefore(since: unknown, peer: string, startedAt: number, self: string): boolean {
  if (typeof since !== "number" || !Number.isFinite(since)) return false;
  return since < startedAt || (since === startedAt && peer < self);
}

/** A load value's queued prefill per worker: positive integer pairs kept, anything else dropped. */
function pendingOf(raw: unknown): Map<string, PendingLoad> {
  const out = new Map<string, PendingLoad>();
  readPendingPairs(raw, (id, chars, requests) => out.set(id, { chars, requests }));
  return out;
}
