/**
 * --state-url and the shared state's settings; `sharedStateOptions` makes the Redis transport's options
 * when it is on.
 */
import { integer, oneOf, type Parser } from "../config-kit/parsers.js";
import { section } from "../config-kit/setting.js";
import { ConfigError } from "../errors.js";
import { parseAdvertisedUrl } from "./advertised-url.js";
import { MIN_STATE_SECRET_CHARS } from "./state-secret.js";

/**
 * The --state-rank-hold-ms measured (about an op's way to the peers): off by default, since in real
 * time under load the hold's timers ran late and cost TTFT (docs/benchmarks.md, the hold by rank).
 */
export const SUGGESTED_RANK_HOLD_MS = 2;

export interface StateConfig {
  /** --state-url; undefined = this replica routes on its own state. */
  url: string | undefined;
  /** --state-secret: signs what this replica writes, checks what it reads, seals API keys. */
  secret: string | undefined;
  keyPrefix: string;
  maxTextChars: number;
  streamLength: number;
  loadIntervalMs: number;
  queueSize: number;
  /** --state-claim-timeout-ms: 0 turns new-prefix claims off. */
  claimTimeoutMs: number;
  /** --state-claim-ttl-ms */
  claimTtlMs: number;
  /** --state-rank-hold-ms: 0 = replicas never hold a decision (scheduling/scheduler.ts holdFor). */
  rankHoldMs: number;
  /** --state-max-op-age-ms: how old a membership op or workers-hash value may be. */
  maxOpAgeMs: number;
  /** --state-file: the index snapshot saved on shutdown and loaded on start; undefined = none. */
  file: string | undefined;
  /** --state-snapshot-interval-ms: how often the replicas refresh the snapshot in Redis (0 = never). */
  snapshotIntervalMs: number;
  /** --state-snapshot-max-bytes: the largest snapshot written or read. */
  snapshotMaxBytes: number;
  /** --state-advertise-url: where peers reach this replica (to relay to it as leader); undefined = none. */
  advertiseUrl: string | undefined;
  /** --state-relay-timeout-ms: how long a relay waits for the leader to say it has the request. */
  relayTimeoutMs: number;
  /**
   * --state-relay: how a replica defers to the leader (proxy/leader-relay.ts); undefined = not
   * given: `decisions` when relaying at all (relayMode).
   */
  relay: StateRelayMode | undefined;
}

/**
 * --state-relay: `decisions` (the default) asks the leader where every request goes (it admits
 * and counts it) and carries it there; `all` relays every request whole, so that the leader
 * decides, admits, counts and serves all of them; `new-prefixes` relays only a request that would
 * claim a new prefix.
 */
export const STATE_RELAY_MODES = ["new-prefixes", "all", "decisions"] as const;
export type StateRelayMode = (typeof STATE_RELAY_MODES)[number];

/** The Redis transport's options: the state section when it is on (a URL, and so a secret). */
export interface SharedStateOptions extends Omit<StateConfig, "url" | "secret" | "file"> {
  url: string;
  secret: string;
  /**
   * radixgate-cluster's id when its processes also share over the local channel: this replica's
   * id starts with it, and the index ops and counts of the replicas that share it (this host's
   * siblings, which arrive over that channel) are left out of what is read from Redis.
   */
  replicaGroup?: string;
}

/** redis:// or rediss:// (TLS); Valkey speaks the same protocol. Errors never echo the URL (it may hold a password). */
const stateUrl: Parser<string | undefined> = (raw, flag) => {
  if (raw.trim() === "") return undefined;
  let url: URL;
  try {
    url = new URL(raw.trim());
  } catch {
    throw new ConfigError(flag, "must be a URL like redis://host:6379/0");
  }
  if (!["redis:", "rediss:"].includes(url.protocol)) {
    throw new ConfigError(flag, `must start with redis:// or rediss://, got ${url.protocol}//`);
  }
  const db = url.pathname.replace(/^\//, "");
  if (db !== "" && !/^\d+$/.test(db)) {
    throw new ConfigError(flag, `database must be a number (redis://host:6379/0), got "/${db}"`);
  }
  return raw.trim();
};

/** Errors never echo the secret. */
const stateSecret: Parser<string | undefined> = (raw, flag) => {
  if (raw === "") return undefined;
  if (raw.length < MIN_STATE_SECRET_CHARS)
    throw new ConfigError(
      flag,
      `must be at least ${MIN_STATE_SECRET_CHARS} characters (e.g. openssl rand -hex 32), got ${raw.length}`,
    );
  return raw;
};

/** --state-advertise-url: an http(s) origin without credentials (advertised-url.ts). */
const advertiseUrl: Parser<string | undefined> = (raw, flag) => {
  const trimmed = raw.trim();
  if (trimmed === "") return undefined;
  const parsed = parseAdvertisedUrl(trimmed);
  if ("problem" in parsed) throw new ConfigError(flag, parsed.problem);
  return parsed.origin;
};

const keyPrefix: Parser<string> = (raw, flag) => {
  if (!/^[A-Za-z0-9_.:{}-]{1,64}$/.test(raw))
    throw new ConfigError(flag, `must be 1-64 characters of A-Z a-z 0-9 _ . : { } -, got "${raw}"`);
  return raw;
};

/**
 * The fleet's --state-secret, which --state-url needs: without it anyone who can write to Redis
 * could add workers to every replica, so the router refuses to start rather than trust Redis.
 */
export function requireStateSecret(config: Pick<StateConfig, "secret">): string {
  if (config.secret === undefined)
    throw new ConfigError(
      "--state-secret",
      "is required with --state-url: give every replica of the fleet the same secret (e.g. RADIXGATE_STATE_SECRET=$(openssl rand -hex 32)); updates in Redis are signed with it and peers drop unsigned ones (see docs/architecture.md, shared state)",
    );
  return config.secret;
}

export const STATE_SETTINGS = section<StateConfig>(
  {
    url: {
      flag: "--state-url",
      arg: "<redis-url>",
      description:
        "Share routing decisions, in-flight counts and workers with other replicas through Redis 7 / Valkey, e.g. redis://10.0.0.5:6379/0 (rediss:// for TLS). Unset = this replica routes on its own state. Never logged (it may hold a password).",
      default: undefined,
      parse: stateUrl,
      secret: true,
    },
    secret: {
      flag: "--state-secret",
      arg: "<secret>",
      description: `Required with --state-url: a secret shared by the fleet's replicas (at least ${MIN_STATE_SECRET_CHARS} characters, e.g. \`openssl rand -hex 32\`; best given as RADIXGATE_STATE_SECRET). Every update written to Redis is signed with it (HMAC) and peers drop what is not; workers' own API keys travel sealed with it (AES-256-GCM). Never logged.`,
      default: undefined,
      parse: stateSecret,
      secret: true,
    },
    keyPrefix: {
      flag: "--state-key-prefix",
      arg: "<prefix>",
      description:
        "With --state-url: prefix of every Redis key, so several fleets can share one Redis (replicas of one fleet use the same).",
      default: "radixgate",
      parse: keyPrefix,
    },
    maxTextChars: {
      flag: "--state-max-text-chars",
      arg: "<chars>",
      description:
        "With --state-url: characters of each routed text published to the other replicas (its first ones; the rest of a long prompt is not shared).",
      default: 16384,
      parse: integer(1, 1_048_576),
    },
    streamLength: {
      flag: "--state-stream-length",
      arg: "<n>",
      description:
        "With --state-url: decisions kept in the Redis stream (approximately); a replica that starts or reconnects replays them.",
      default: 10000,
      parse: integer(1),
    },
    loadIntervalMs: {
      flag: "--state-load-interval-ms",
      arg: "<ms>",
      description:
        "With --state-url: how often each replica publishes its in-flight counts and reads its peers' (a peer's count expires after 3 intervals, at least 750 ms). A request lasts about as long as the default: counts much older than that are another moment's.",
      default: 50,
      parse: integer(10, 60_000),
    },
    queueSize: {
      flag: "--state-queue-size",
      arg: "<n>",
      description:
        "With --state-url: updates waiting to be published while Redis is slow or down; past it the oldest are dropped.",
      default: 10000,
      parse: integer(1),
    },
    claimTimeoutMs: {
      flag: "--state-claim-timeout-ms",
      arg: "<ms>",
      description:
        "With --state-url: how long a request that starts a new prefix waits for its claim in Redis (the first replica to claim a prefix names its worker, the others follow it); past it this replica's own choice stands. 0 = no claims.",
      default: 50,
      parse: integer(0, 10_000),
    },
    claimTtlMs: {
      flag: "--state-claim-ttl-ms",
      arg: "<ms>",
      description:
        "With --state-url: how long a new-prefix claim lives in Redis; long enough for its decision to reach every replica through the ops stream.",
      default: 2000,
      parse: integer(10, 600_000),
    },
    rankHoldMs: {
      flag: "--state-rank-hold-ms",
      arg: "<ms>",
      description:
        "With --state-url or radixgate-cluster: how long, per rank, a replica holds a decision that places a new prefix or moves one off the worker holding it, before taking it (rank 0 never holds, rank r holds r times this, at most 8 times), so that decisions the replicas take at the same instant are taken in turn, each on the earlier ones' decisions (about the time an op takes to reach the peers). Requests that stay where their prefix is are never held. 0 = never (the default; 2 was measured).",
      default: 0,
      parse: integer(0, 1000),
    },
    maxOpAgeMs: {
      flag: "--state-max-op-age-ms",
      arg: "<ms>",
      description:
        "With --state-url: how old a worker change read from Redis may be, from a replica not heard from since this one started (an older one is a replay and is refused), and how old a value of the shared workers hash may be (replicas that keep a worker sign its value again every third of this). After every replica was down for longer, each starts from its own workers.",
      default: 600_000,
      parse: integer(1000, 86_400_000),
    },
    file: {
      flag: "--state-file",
      arg: "<path>",
      description:
        "A file where the router saves a snapshot of its prefix index (each worker's newest texts, within --state-snapshot-max-bytes) when it stops, and loads it from when it starts, so that a restarted router routes on what the engines still hold. Signed with --state-secret when given (else only checksummed); a missing, corrupt, foreign, oversized or older than --state-max-op-age-ms file is refused with a log line and the router starts cold. Unset = none.",
      default: undefined,
      parse: (raw) => (raw.trim() === "" ? undefined : raw.trim()),
    },
    snapshotIntervalMs: {
      flag: "--state-snapshot-interval-ms",
      arg: "<ms>",
      description:
        "With --state-url: how often one of the replicas writes a snapshot of the prefix index to Redis (signed like the ops); a replica that starts loads it, then replays only the ops after it, so it knows what the engines hold beyond the ops stream's length. 0 = no snapshot.",
      default: 30_000,
      parse: integer(0, 86_400_000),
    },
    snapshotMaxBytes: {
      flag: "--state-snapshot-max-bytes",
      arg: "<bytes>",
      description:
        "The largest index snapshot written or read (--state-file, --state-url): each worker gets an equal share, its newest texts first; a larger one found is refused.",
      default: 64 * 1024 * 1024,
      parse: integer(4096, 512 * 1024 * 1024),
    },
    advertiseUrl: {
      flag: "--state-advertise-url",
      arg: "<url>",
      description:
        "With --state-url: where the other replicas reach this one over HTTP (an origin, e.g. http://10.0.0.7:8080; no credentials), published with its load. When every replica sets it, the first-started replica (the leader) decides for all of them: by default (--state-relay decisions) every request is decided, admitted and counted there, the replica that got it carrying its bytes to the worker, so replicas decide as one router would (measured within 1.5 points of one router's hit rate with 2 and 4 replicas; without it they decide apart with claims, 1-3 points under; docs/benchmarks.md). A replica that finds the leader unreachable or silent for --state-relay-timeout-ms decides the request itself with a claim, and relays pause for a second; when the leader stops, the next replica by start order leads. Needs claims (--state-claim-timeout-ms above 0); not in radixgate-cluster; not with --data-plane nginx. Unset = no relaying: claims as before.",
      default: undefined,
      parse: advertiseUrl,
    },
    relayTimeoutMs: {
      flag: "--state-relay-timeout-ms",
      arg: "<ms>",
      description:
        "With --state-advertise-url: how long a relayed request waits for the leader replica to say it has read it (an interim 102 answer); past it, or on a refused connection, the request is decided here with a claim (nothing was sent to the client yet) and relays pause for a second. Longer than a claim's wait: the leader reads and parses the whole body first.",
      default: 250,
      parse: integer(1, 10_000),
    },
    relay: {
      flag: "--state-relay",
      arg: "<mode>",
      description:
        "With --state-advertise-url: how a replica other than the leader defers to it. decisions (the default): the leader decides, admits and counts every inference request until it ends, as one router would, and the replica that got it carries its bytes straight to the worker: it asks the leader where (a call signed with --state-secret, carrying the request), sends it there and tells the leader when the first byte came and how it ended (the protocol nginx speaks with --data-plane nginx); measured within 1.5 points of one router's hit rate with 2 and 4 replicas (docs/benchmarks.md), at one round trip to the leader per request. all: the whole request goes through the leader, which serves it too (every byte then passes through the leader's process: failover, not throughput). new-prefixes: only a request starting a new prefix (one it would claim) goes whole to the leader; the rest are decided here (measured no better than claims). Every way, a relay that finds the leader unreachable or silent falls back to deciding here with a claim, and requests of the precise index (--kv-events) stay where they arrive. With prefill/decode disaggregation the leader relays a pair's answer itself.",
      // Unset = decisions (relayMode); a mode given without what it relays through is refused.
      default: undefined,
      shownDefault: "decisions",
      parse: oneOf(STATE_RELAY_MODES),
    },
  },
  (s) => {
    if (s.url !== undefined) requireStateSecret(s);
    if (s.relay === "all" || s.relay === "decisions") requireRelaying(s);
  },
);

/** The --state-relay mode in force: decisions unless another was given. */
export function relayMode(config: Pick<StateConfig, "relay">): StateRelayMode {
  return config.relay ?? "decisions";
}

/** --state-relay all and decisions (given) relay through what --state-advertise-url builds: refused without it. */
function requireRelaying(s: StateConfig): void {
  const missing =
    s.url === undefined
      ? "--state-url (the replicas' shared state, through which they find the leader)"
      : s.advertiseUrl === undefined
        ? "--state-advertise-url (where the other replicas reach this one; every replica sets its own)"
        : s.claimTimeoutMs === 0
          ? "claims (--state-claim-timeout-ms above 0: a relay the leader cannot take falls back to one)"
          : undefined;
  if (missing !== undefined)
    throw new ConfigError(
      "--state-relay",
      `${s.relay} relays every request to the leader and needs ${missing}`,
    );
}

/** The Redis transport's options when --state-url is given, else undefined. */
export function sharedStateOptions(config: StateConfig): SharedStateOptions | undefined {
  if (config.url === undefined) return undefined;
  const { url, secret: _secret, file: _file, ...rest } = config;
  return { ...rest, url, secret: requireStateSecret(config) };
}
