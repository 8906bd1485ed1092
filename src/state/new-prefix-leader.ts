import type { Redis } from "ioredis";
import type { LeaderAsk, LeaderGrant, NewPrefixLeader } from "../index/prefix-claims.js";
import type { PeerPending } from "./peer-pending.js";
import type { RedisLink } from "./redis-link.js";
import type { StateKeys } from "./state-keys.js";
import { lastSeqSent, type RejectReason } from "./state-op.js";
import type { StateSecret } from "./state-secret.js";

/**
 * How an ask ended at the asker: answered; timeout (no answer in time: its own choice stands);
 * skipped (not asked: too many waiting, or paused after a timeout). At the leader: granted.
 */
export type LeaderAskOutcome = "answered" | "timeout" | "skipped" | "granted";

export interface RedisNewPrefixLeaderOptions {
  replicaId: string;
  keys: StateKeys;
  /** Signs asks and answers; unsigned or badly signed ones are dropped and counted. */
  secret: StateSecret;
  /** --state-claim-timeout-ms: how long an asker waits for the leader's answer. */
  timeoutMs: number;
  /** --state-claim-ttl-ms: how long the leader remembers where a new prefix went. */
  rememberMs: number;
  /** This replica's rank among the replicas (state/load-sync.ts); undefined until known. */
  rank: () => number | undefined;
  /** Where the leader counts a grant as a peer's queued prefill until the asker's report covers it. */
  pending: () => PeerPending | undefined;
  /** A replica's name among the peers `pending` counts. */
  peerName: (replicaId: string) => string;
  /** How long a peer's decision counts without a report covering it. */
  pendingTtlMs: number;
  /** Longest text window an ask carries. */
  maxWindowChars?: number;
  onOutcome?: (outcome: LeaderAskOutcome) => void;
  onRejected?: (reason: RejectReason) => void;
}

/** Asks waiting at once; past it a request decides on its own view (bounded memory). */
const MAX_WAITING = 1024;
/** After an ask timed out, none is made for this long (a stalled leader costs one wait per pause). */
const PAUSE_AFTER_TIMEOUT_MS = 1000;
/** An ask or answer older than this is a replay (they live for one timeout), and is refused. */
const MAX_MESSAGE_AGE_MS = 10_000;
/** Longest ask or answer read (a few hundred bytes per worker). */
const MAX_MESSAGE_CHARS = 262_144;
/** Longest ladder an ask carries (two rungs per doubling of a text up to 1M characters). */
const MAX_LADDER_CHARS = 2048;
/**
 * Longest text an ask may describe: the leader pads the window to this length (the cost reads it),
 * so it is bounded like a request body (--max-payload-size's default; a character is a byte or more).
 */
const MAX_ASK_TEXT_CHARS = 64 * 1024 * 1024;
/** Candidates an ask names at most. */
const MAX_ASK_WORKERS = 4096;
/** New prefixes the leader remembers at once; past it the oldest go. */
const MAX_REMEMBERED = 16_384;
/** The text window an ask carries: from the block before the match to a block past the prefix. */
const DEFAULT_WINDOW_CHARS = 1024;

/**
 * --state-new-prefix leader, over Redis pub/sub on the claims connection (asks and answers) and a
 * subscriber connection of its own: the replica of rank 0 decides every new prefix, its own at
 * once and the others' when they ask (one message each way). Each message is signed with
 * --state-secret under its channel and carries when it was sent, so that an unsigned, foreign or
 * replayed one is dropped and counted. The leader counts each grant as the asker's queued prefill
 * on the chosen worker until that replica's next load report covers it (state/peer-pending.ts).
 *
 * Nothing is lost when the leader changes: an ask that reaches a replica that is not rank 0 is
 * not answered, and the asker's own choice stands after its timeout; while no rank is known the
 * replica claims as before (role undefined).
 */
export class RedisNewPrefixLeader implements NewPrefixLeader {
  private subscriber: Redis | undefined;
  private subscribed = false;
  private next = 0;
  private readonly waiting = new Map<number, (worker: string | undefined) => void>();
  private pausedUntil = 0;
  private decide: ((ask: LeaderAsk) => LeaderGrant | undefined) | undefined;
  /** Where each new prefix went (key → worker and when), in insertion order. */
  private readonly remembered = new Map<string, { worker: string; ladder: string; at: number }>();
  private readonly answers: string;

  constructor(
    private readonly link: RedisLink,
    private readonly options: RedisNewPrefixLeaderOptions,
  ) {
    this.answers = options.keys.leaderAnswers(options.replicaId);
  }

  role(): "leader" | "follower" | undefined {
    if (!this.subscribed || this.link.claims.status !== "ready") return undefined;
    const rank = this.options.rank();
    return rank === undefined ? undefined : rank === 0 ? "leader" : "follower";
  }

  serve(decide: (ask: LeaderAsk) => LeaderGrant | undefined): void {
    this.decide = decide;
  }

  granted(key: string): { readonly worker: string; readonly ladder: string } | undefined {
    const r = this.remembered.get(key);
    if (r === undefined) return undefined;
    if (Date.now() - r.at > this.options.rememberMs) {
      this.remembered.delete(key);
      return undefined;
    }
    return r;
  }

  remember(key: string, worker: string, ladder: string): void {
    this.remembered.delete(key);
    this.remembered.set(key, { worker, ladder, at: Date.now() });
    if (this.remembered.size > MAX_REMEMBERED) {
      const oldest = this.remembered.keys().next().value;
      if (oldest !== undefined) this.remembered.delete(oldest);
    }
  }

  ask(ask: LeaderAsk): Promise<string | undefined> | undefined {
    if (this.waiting.size >= MAX_WAITING || Date.now() < this.pausedUntil) {
      this.options.onOutcome?.("skipped");
      return undefined;
    }
    const n = ++this.next;
    const max = this.options.maxWindowChars ?? DEFAULT_WINDOW_CHARS;
    const body = JSON.stringify({
      n,
      r: this.options.replicaId,
      t: Date.now(),
      // The asker's op for this decision is stamped after this: its first report past it covers it.
      q: lastSeqSent() + 1,
      k: ask.key,
      e: ask.end,
      l: ask.length,
      ...(ask.model !== undefined ? { m: ask.model } : {}),
      i: ask.ids,
      h: ask.held,
      a: ask.windowAt,
      w: ask.window.slice(0, max),
      d: ask.ladder,
    });
    const channel = this.options.keys.leaderAsks;
    const message = this.options.secret.signValue(channel, body);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        if (!this.waiting.delete(n)) return;
        this.pausedUntil = Date.now() + PAUSE_AFTER_TIMEOUT_MS;
        this.options.onOutcome?.("timeout");
        resolve(undefined);
      }, this.options.timeoutMs);
      this.waiting.set(n, (worker) => {
        clearTimeout(timer);
        this.waiting.delete(n);
        resolve(worker);
      });
      this.link.claims.publish(channel, message).catch(() => this.waiting.get(n)?.(undefined));
    });
  }

  /** Connects the subscriber and listens to the asks and this replica's answers. */
  async start(): Promise<void> {
    if (this.subscriber !== undefined) return;
    const sub = this.link.claims.duplicate({ connectionName: "radixgate-leader" });
    this.subscriber = sub;
    sub.on("error", () => {});
    sub.on("close", () => {
      this.subscribed = false;
    });
    sub.on("message", (channel: string, raw: string) => this.received(channel, raw));
    const subscribe = () =>
      sub.subscribe(this.options.keys.leaderAsks, this.answers).then(
        () => {
          this.subscribed = true;
        },
        () => {},
      );
    // ioredis subscribes again by itself after a reconnection; "ready" marks it usable again.
    sub.on("ready", () => void subscribe());
    await sub.connect().catch(() => {});
  }

  async stop(): Promise<void> {
    for (const resolve of [...this.waiting.values()]) resolve(undefined);
    const sub = this.subscriber;
    this.subscriber = undefined;
    this.subscribed = false;
    if (sub !== undefined) await sub.quit().catch(() => sub.disconnect());
  }

  private received(channel: string, raw: string): void {
    if (channel === this.answers) this.answered(raw);
    else if (channel === this.options.keys.leaderAsks) this.asked(raw);
  }

  /** A peer's ask: decided here when this replica is the leader, else left to the asker's timeout. */
  private asked(raw: string): void {
    const decide = this.decide;
    if (decide === undefined || this.options.rank() !== 0) return;
    const msg = this.read(this.options.keys.leaderAsks, raw);
    if (msg === undefined) return;
    const ask = readAsk(msg);
    if (ask === undefined || typeof msg.r !== "string" || msg.r.length > 256 || !seq(msg.q)) {
      this.options.onRejected?.("unreadable");
      return;
    }
    if (msg.r === this.options.replicaId) return;
    let grant: LeaderGrant | undefined;
    try {
      grant = decide(ask);
    } catch {
      // A peer's ask never takes the leader down: the asker's timeout lets its own choice stand.
      this.options.onRejected?.("unreadable");
      return;
    }
    if (grant === undefined) return;
    this.remember(ask.key, grant.worker, ask.ladder);
    const { pending, peerName, pendingTtlMs } = this.options;
    pending()?.decided(peerName(msg.r), pendingTtlMs, grant.worker, grant.chars, msg.q);
    this.options.onOutcome?.("granted");
    const to = this.options.keys.leaderAnswers(msg.r);
    const body = JSON.stringify({ n: msg.n, t: Date.now(), w: grant.worker });
    void this.link.claims.publish(to, this.options.secret.signValue(to, body)).catch(() => {});
  }

  private answered(raw: string): void {
    const msg = this.read(this.answers, raw);
    if (msg === undefined) return;
    if (!seq(msg.n) || typeof msg.w !== "string" || msg.w.length > 4096) {
      this.options.onRejected?.("unreadable");
      return;
    }
    const resolve = this.waiting.get(msg.n);
    if (resolve === undefined) return; // timed out meanwhile: its own choice stood
    this.options.onOutcome?.("answered");
    resolve(msg.w);
  }

  /** A message's JSON if it is signed under `channel` and recent; else counts the refusal. */
  private read(channel: string, raw: string): Record<string, unknown> | undefined {
    const reason = this.options.secret.refusal(channel, raw, MAX_MESSAGE_CHARS);
    if (reason !== undefined) {
      this.options.onRejected?.(reason);
      return undefined;
    }
    let msg: unknown;
    try {
      msg = JSON.parse(raw.slice(raw.indexOf(" ") + 1));
    } catch {
      msg = undefined;
    }
    if (msg === null || typeof msg !== "object" || Array.isArray(msg)) {
      this.options.onRejected?.("unreadable");
      return undefined;
    }
    const m = msg as Record<string, unknown>;
    if (typeof m.t !== "number" || Math.abs(Date.now() - m.t) > MAX_MESSAGE_AGE_MS) {
      this.options.onRejected?.("stale");
      return undefined;
    }
    return m;
  }
}

const seq = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;

/** An ask as received, checked field by field; undefined when any is not as sent. */
function readAsk(m: Record<string, unknown>): LeaderAsk | undefined {
  const { k, e, l, i, h, a, w, d } = m;
  if (typeof k !== "string" || k.length > 256 || !seq(e) || !seq(l) || !seq(a)) return undefined;
  if (l > MAX_ASK_TEXT_CHARS) return undefined;
  if (typeof d !== "string" || d.length > MAX_LADDER_CHARS) return undefined;
  if (typeof w !== "string" || !Array.isArray(i) || !Array.isArray(h)) return undefined;
  if (i.length !== h.length || i.length > MAX_ASK_WORKERS || e > l || a + w.length > l)
    return undefined;
  if (!i.every((id) => typeof id === "string" && id.length <= 4096)) return undefined;
  if (!h.every((x) => seq(x) && x <= l)) return undefined;
  if (m.m !== undefined && (typeof m.m !== "string" || m.m.length > 4096)) return undefined;
  return {
    key: k,
    end: e,
    length: l,
    ...(typeof m.m === "string" ? { model: m.m } : {}),
    ids: i as string[],
    held: h as number[],
    windowAt: a,
    window: w,
    ladder: d,
  };
}
