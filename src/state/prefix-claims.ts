import type { PrefixClaims } from "../index/prefix-claims.js";
import type { RedisLink } from "./redis-link.js";
import type { StateKeys } from "./state-keys.js";

/**
 * won: the proposal became the claim; followed: another claim was there first (a peer's, or an
 * earlier one of this replica); timeout / error: no answer in time, the proposal stands;
 * skipped: not tried (too many claims waiting, or paused for a second after a timeout, over either transport).
 */
export type ClaimOutcome = "won" | "followed" | "timeout" | "error" | "skipped";

/** What the place where claims meet answered: the claim's holder, and whether it is this proposal. */
export type ClaimReply = { readonly holder: string; readonly won: boolean } | "error";

/**
 * One round trip to the place where replicas' claims meet (Redis between hosts, the cluster's
 * primary on one host): `SET key value NX PX ttl`, then the claim's value. `abandoned` fires when
 * the asker stopped waiting (its timeout), so a transport can let go of the request.
 */
export interface ClaimRoundTrip {
  /** Whether a claim can be asked now (the link is up). */
  up(): boolean;
  ask(key: string, value: string, ttlMs: number, abandoned: AbortSignal): Promise<ClaimReply>;
}

export interface ReplicaClaimsOptions {
  /** --state-claim-ttl-ms: how long a claim lives (long enough for its decision to reach every peer). */
  ttlMs: number;
  /** --state-claim-timeout-ms: how long a request waits for the answer before its own choice stands. */
  timeoutMs: number;
  /** Told how each claim ended. */
  onOutcome?: (outcome: ClaimOutcome, seconds?: number) => void;
}

/** Claims waiting at once; past it a request routes on its own choice (bounded memory). */
const MAX_PENDING = 1024;
/**
 * After a claim timed out, how long no claim is tried, whatever the transport: a place that did
 * not answer in time (a stalled Redis, or a primary whose event loop is busy) would make every new
 * prefix meanwhile wait the whole timeout too, and each question adds to its backlog. One wait
 * per pause bounds what a stall costs the requests.
 */
const PAUSE_AFTER_TIMEOUT_MS = 1000;

/**
 * New-prefix claims over any transport. Only requests that start a new prefix call this (the
 * decider decides which); each waits at most `timeoutMs`, nothing is asked while the transport
 * is down, and after a timeout none is tried for a while, so a stalled transport delays few
 * requests. Requests of this replica that claim the same prefix while an answer is on its way
 * share that answer instead of asking again.
 */
export class ReplicaClaims implements PrefixClaims {
  private readonly pending = new Map<string, Promise<string | undefined>>();
  /** Epoch ms before which no claim is tried (set by a timeout). */
  private pausedUntil = 0;

  constructor(
    private readonly trip: ClaimRoundTrip,
    private readonly options: ReplicaClaimsOptions,
  ) {}

  claim(key: string, value: string): Promise<string | undefined> | undefined {
    if (!this.trip.up()) return undefined;
    const waiting = this.pending.get(key);
    if (waiting !== undefined) return waiting;
    if (this.pending.size >= MAX_PENDING || Date.now() < this.pausedUntil) {
      this.options.onOutcome?.("skipped");
      return undefined;
    }
    const abandon = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<"timeout">((resolve) => {
      timer = setTimeout(() => resolve("timeout"), this.options.timeoutMs);
    });
    const started = performance.now();
    const ask = this.trip.ask(key, value, this.options.ttlMs, abandon.signal);
    const answer = Promise.race([ask, timedOut]).then(
      (reply) => {
        if (reply === "timeout") {
          abandon.abort();
          this.pausedUntil = Date.now() + PAUSE_AFTER_TIMEOUT_MS;
          return this.ended("timeout", undefined, started);
        }
        if (reply === "error") return this.ended("error", undefined, started);
        return this.ended(reply.won ? "won" : "followed", reply.holder, started);
      },
      () => this.ended("error", undefined, started),
    );
    const settled = answer.finally(() => {
      clearTimeout(timer);
      this.pending.delete(key);
    });
    this.pending.set(key, settled);
    return settled;
  }

  /** Tells the outcome and how long the asker waited for it (since `started`, performance.now()). */
  private ended(
    outcome: ClaimOutcome,
    holder: string | undefined,
    started: number,
  ): string | undefined {
    this.options.onOutcome?.(outcome, (performance.now() - started) / 1000);
    return holder;
  }
}

export interface RedisPrefixClaimsOptions extends ReplicaClaimsOptions {
  keys: StateKeys;
}

/**
 * Claims in Redis: `SET <prefix>:claim:<digest> <value> NX PX ttl` then `GET` in one pipeline on
 * the claims connection, so the answer is the claim's value whether this proposal made it or
 * another did.
 */
export class RedisPrefixClaims extends ReplicaClaims {
  constructor(link: RedisLink, options: RedisPrefixClaimsOptions) {
    super(
      {
        up: () => link.claims.status === "ready",
        async ask(key, value, ttlMs) {
          const redisKey = options.keys.claim(key);
          const reply = await link.claims
            .pipeline()
            .set(redisKey, value, "PX", ttlMs, "NX")
            .get(redisKey)
            .exec();
          const [set, get] = reply ?? [];
          const holder = get?.[1];
          if (set?.[0] != null || get?.[0] != null || typeof holder !== "string") return "error";
          return { holder, won: set?.[1] === "OK" };
        },
      },
      options,
    );
  }
}
