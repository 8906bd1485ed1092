import { ADMISSION_SETTINGS, type AdmissionConfig } from "./admission/settings.js";
import { CACHE_ACCOUNT_SETTINGS, type CacheAccountConfig } from "./cache-account/settings.js";
import { PD_SETTINGS, type PdConfig, validatePdConfig } from "./disaggregation/settings.js";
import {
  KUBERNETES_SETTINGS,
  type KubernetesDiscoverySettings,
  validateKubernetesSettings,
} from "./discovery/kubernetes-settings.js";
import { ConfigError } from "./errors.js";
import { DEFAULT_BLOCK_CHARS, DEFAULT_CAPACITY_BLOCKS } from "./index/block-hash-index.js";
import { PREFIX_INDEX_NAMES, type PrefixIndexName } from "./index/factory.js";
import { SESSION_SOURCES, type SessionSource } from "./intake/session-key.js";
import { LOG_LEVELS, type LogLevel } from "./logger.js";
import { DEFAULT_TIE_BREAK, TIE_BREAKS, type TieBreak } from "./policies/options.js";
import { POLICY_NAMES, type PolicyName } from "./policies/policy.js";
import { SchedulerConfigError } from "./scheduling/config-path.js";
import { loadSchedulerConfig } from "./scheduling/scheduler-config.js";
import { MIN_STATE_SECRET_CHARS } from "./state/state-secret.js";
import { TRACING_SETTINGS, type TracingConfig } from "./tracing/settings.js";
import { MODEL_ROUTING_MODES, type ModelRoutingMode } from "./workers/served-models.js";
import { normalizeWorkerUrl } from "./workers/worker-url.js";

/** The router's whole configuration, after parsing and validation. */
export interface Config
  extends AdmissionConfig,
    PdConfig,
    KubernetesDiscoverySettings,
    CacheAccountConfig,
    TracingConfig {
  workerUrls: string[];
  /** --worker-file: a JSON or YAML list of workers, watched ("" = none). */
  workerFile: string;
  /** --worker-dns: NAME[:PORT] whose A/AAAA (or SRV) records are the workers ("" = none). */
  workerDns: string;
  dnsIntervalSecs: number;
  dnsTimeoutSecs: number;
  discoveryGraceSecs: number;
  host: string;
  port: number;
  policy: PolicyName;
  /** --scheduler-config: a file of scheduling profiles ("" = none); its first profile routes. */
  schedulerConfig: string;
  cacheThreshold: number;
  balanceAbsThreshold: number;
  balanceRelThreshold: number;
  cacheLoadBound: number;
  prefixCostQueueWeight: number;
  prefixCostRequestChars: number;
  prefixCostTieBreak: TieBreak;
  evictionIntervalSecs: number;
  /** A fixed budget in characters, or "auto": learned from each worker's KV capacity. */
  maxTreeSize: number | "auto";
  treeCapacityFactor: number;
  enginePollIntervalSecs: number;
  enginePollTimeoutSecs: number;
  prefixIndex: PrefixIndexName;
  /** Characters a block, or "auto": 16 tokens × 4 until a vLLM worker reports its block size. */
  blockHashChars: number | "auto";
  blockHashCapacity: number;
  maxPayloadSize: number;
  maxBodyBufferBytes: number;
  bodyReadTimeoutSecs: number;
  bodyIdleTimeoutSecs: number;
  bodyMinRateBytes: number;
  bodyLingerSecs: number;
  bodyLingerBytes: number;
  parseOffloadBytes: number;
  parseWorkers: number;
  parseWorkerMemoryMb: number;
  maxRoutingTextChars: number;
  requestTimeoutSecs: number;
  connectTimeoutSecs: number;
  firstByteTimeoutSecs: number;
  streamFirstByteTimeoutSecs: number;
  idleTimeoutSecs: number;
  clientStallSecs: number;
  retryMaxAttempts: number;
  retryInitialBackoffMs: number;
  retryMaxBackoffMs: number;
  maxCoolDownSecs: number;
  healthCheckIntervalSecs: number;
  healthCheckTimeoutSecs: number;
  healthFailureThreshold: number;
  healthSuccessThreshold: number;
  healthCheckEndpoint: string;
  cbFailureThreshold: number;
  cbSuccessThreshold: number;
  cbTimeoutSecs: number;
  maxConcurrentRequests: number;
  queueSize: number;
  queueTimeoutSecs: number;
  apiKey: string | undefined;
  adminApiKey: string | undefined;
  workerApiKey: string | undefined;
  allowLinkLocalWorkers: boolean;
  logLevel: LogLevel;
  requestIdHeaders: string[];
  prometheusPort: number | undefined;
  shutdownGraceSecs: number;
  modelRouting: ModelRoutingMode;
  sessionAffinity: SessionSource;
  sessionHeader: string;
  maxSessions: number;
  kvEvents: boolean;
  kvEventsEndpointTemplate: string;
  kvEventsReplayTemplate: string;
  kvEventsAllowIpc: boolean;
  kvEventsReplayTimeoutMs: number;
  kvEventsRebuildSecs: number;
  kvEventsMaxMessageBytes: number;
  kvEventsDpSize: number;
  kvIndexMaxBlocks: number;
  kvSpeculativeTtlMs: number;
  kvBlockSize: number;
  tokenizeTimeoutMs: number;
  tokenizerCacheTokens: number;
  tokenizerPath: string;
  stateUrl: string | undefined;
  stateSecret: string | undefined;
  stateKeyPrefix: string;
  stateMaxTextChars: number;
  stateStreamLength: number;
  stateLoadIntervalMs: number;
  stateQueueSize: number;
  stateClaimTimeoutMs: number;
  stateClaimTtlMs: number;
}

type Parser<T> = (raw: string, flag: string) => T;

/** One row of the settings table: the single source for defaults, the CLI, env vars and the docs. */
export interface Setting<K extends keyof Config = keyof Config> {
  key: K;
  flag: string;
  /** Value placeholder shown in --help; `<name...>` takes several values (`--worker-urls a b c`). */
  arg: string;
  description: string;
  default: Config[K];
  parse: Parser<Config[K]>;
  /** Never print the value (help, logs, docs). */
  secret?: boolean;
}

const number =
  (
    min: number,
    max = Number.POSITIVE_INFINITY,
    opts: { integer?: boolean; minExclusive?: boolean } = {},
  ) =>
  (raw: string, flag: string): number => {
    const value = Number(raw.trim());
    const kind = opts.integer ? "an integer" : "a number";
    const lower = opts.minExclusive ? `> ${min}` : `>= ${min}`;
    const range = max === Number.POSITIVE_INFINITY ? lower : `in [${min}, ${max}]`;
    const bad =
      raw.trim() === "" ||
      !Number.isFinite(value) ||
      (opts.integer && !Number.isInteger(value)) ||
      value < min ||
      (opts.minExclusive && value === min) ||
      value > max;
    if (bad) throw new ConfigError(flag, `must be ${kind} ${range}, got "${raw}"`);
    return value;
  };

const integer = (min: number, max = Number.MAX_SAFE_INTEGER) => number(min, max, { integer: true });
const port = integer(0, 65535);
const text = (raw: string) => raw;
/** A key: unset means none, but an empty value is refused (it would silently turn auth off). */
const key = (raw: string, flag: string): string | undefined => {
  if (raw.trim() === "")
    throw new ConfigError(
      flag,
      `(or ${envName(flag)}) is empty; unset it to run without a key, or give a key`,
    );
  return raw;
};

const oneOf =
  <T extends string>(values: readonly T[]) =>
  (raw: string, flag: string): T => {
    if ((values as readonly string[]).includes(raw)) return raw as T;
    throw new ConfigError(flag, `must be one of ${values.join(", ")}, got "${raw}"`);
  };

/** NAME[:PORT] for --worker-dns: a DNS name, and the workers' port unless SRV records give it. */
const dnsTarget = (raw: string, flag: string): string => {
  const value = raw.trim();
  if (value === "") return "";
  const match =
    /^([A-Za-z0-9_]([A-Za-z0-9_-]*[A-Za-z0-9])?)(\.[A-Za-z0-9_]([A-Za-z0-9_-]*[A-Za-z0-9])?)*\.?(:(\d{1,5}))?$/.exec(
      value,
    );
  const port = match?.[6] === undefined ? undefined : Number(match[6]);
  if (match === null || value.length > 260 || (port !== undefined && (port < 1 || port > 65535))) {
    throw new ConfigError(
      flag,
      `must be a DNS name with an optional port, e.g. workers.llm.svc.cluster.local:30000, got "${raw}"`,
    );
  }
  return value;
};

const workerUrls = (raw: string, flag: string): string[] =>
  raw
    .split(/[\s,]+/)
    .filter((s) => s !== "")
    .map((url) => {
      try {
        return normalizeWorkerUrl(url);
      } catch (err) {
        throw new ConfigError(flag, (err as Error).message);
      }
    });

/** A boolean flag: `--flag` alone (commander passes true), or true/false/1/0/yes/no. */
const flagValue = (raw: string | boolean, flag: string): boolean => {
  const value = String(raw).trim().toLowerCase();
  if (["true", "1", "yes", "on"].includes(value)) return true;
  if (["false", "0", "no", "off", ""].includes(value)) return false;
  throw new ConfigError(flag, `must be true or false, got "${raw}"`);
};

/** SGLang's Python log level names, accepted for drop-in launch lines. */
const LOG_LEVEL_ALIASES: Record<string, LogLevel> = { warning: "warn", critical: "fatal" };

const logLevel = (raw: string, flag: string): LogLevel =>
  LOG_LEVEL_ALIASES[raw.toLowerCase()] ?? oneOf(LOG_LEVELS)(raw.toLowerCase(), flag);

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9a-z-]+$/;

const headerNames = (raw: string, flag: string): string[] => {
  const names = raw
    .split(/[\s,]+/)
    .filter((n) => n !== "")
    .map((n) => n.toLowerCase());
  for (const n of names) {
    if (!HEADER_NAME.test(n)) throw new ConfigError(flag, `has an invalid header name "${n}"`);
  }
  if (names.length === 0) throw new ConfigError(flag, "needs at least one header name");
  return names;
};

const urlPath = (raw: string, flag: string): string => {
  if (!raw.startsWith("/") || /[\s?#]/.test(raw))
    throw new ConfigError(flag, `must be a path starting with "/", got "${raw}"`);
  return raw;
};

const optionalPort = (raw: string, flag: string): number | undefined =>
  raw === "" ? undefined : port(raw, flag);

/** redis:// or rediss:// (TLS); Valkey speaks the same protocol. Errors never echo the URL (it may hold a password). */
const stateUrl = (raw: string, flag: string): string | undefined => {
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
const stateSecret = (raw: string, flag: string): string | undefined => {
  if (raw === "") return undefined;
  if (raw.length < MIN_STATE_SECRET_CHARS)
    throw new ConfigError(
      flag,
      `must be at least ${MIN_STATE_SECRET_CHARS} characters (e.g. openssl rand -hex 32), got ${raw.length}`,
    );
  return raw;
};

/**
 * The fleet's --state-secret, which --state-url needs: without it anyone who can write to Redis
 * could add workers to every replica, so the router refuses to start rather than trust Redis.
 */
export function requireStateSecret(config: Config): string {
  if (config.stateSecret === undefined)
    throw new ConfigError(
      "--state-secret",
      "is required with --state-url: give every replica of the fleet the same secret (e.g. RADIXGATE_STATE_SECRET=$(openssl rand -hex 32)); updates in Redis are signed with it and peers drop unsigned ones (see docs/architecture.md, shared state)",
    );
  return config.stateSecret;
}

const keyPrefix = (raw: string, flag: string): string => {
  if (!/^[A-Za-z0-9_.:{}-]{1,64}$/.test(raw))
    throw new ConfigError(flag, `must be 1-64 characters of A-Z a-z 0-9 _ . : { } -, got "${raw}"`);
  return raw;
};

/** A scheduler config file, built once to check it (the router builds it again at start). */
const schedulerConfigFile = (raw: string, flag: string): string => {
  if (raw.trim() === "") return "";
  try {
    loadSchedulerConfig(raw);
  } catch (err) {
    if (err instanceof SchedulerConfigError) throw new ConfigError(flag, err.message);
    throw err;
  }
  return raw;
};

function setting<K extends keyof Config>(s: Setting<K>): Setting<K> {
  return s;
}

/** Every setting with its default, in the order `--help` and docs/configuration.md show them. */
export const SETTINGS = [
  setting({
    key: "workerUrls",
    flag: "--worker-urls",
    arg: "<url...>",
    description:
      "Worker base URLs (space- or comma-separated). May be empty: add workers later through the admin API.",
    default: [],
    parse: workerUrls,
  }),
  setting({
    key: "workerFile",
    flag: "--worker-file",
    arg: "<path>",
    description:
      "A JSON or YAML list of workers (URLs, or objects with the fields of POST /workers), watched: added entries join after a health check, removed ones drain. A bad file is logged and ignored; the last good one stands. Empty = none. See docs/discovery.md.",
    default: "",
    parse: text,
  }),
  setting({
    key: "workerDns",
    flag: "--worker-dns",
    arg: "<name[:port]>",
    description:
      "A DNS name whose A/AAAA records are the workers (http://ADDRESS:PORT), or whose SRV records give targets and ports; re-resolved every --dns-interval-secs. A failed lookup keeps the last answer. Empty = none. See docs/discovery.md.",
    default: "",
    parse: dnsTarget,
  }),
  setting({
    key: "dnsIntervalSecs",
    flag: "--dns-interval-secs",
    arg: "<secs>",
    description: "With --worker-dns: seconds between lookups.",
    default: 30,
    parse: number(0, 86_400, { minExclusive: true }),
  }),
  setting({
    key: "dnsTimeoutSecs",
    flag: "--dns-timeout-secs",
    arg: "<secs>",
    description: "With --worker-dns: limit for one lookup; past it the last answer stands.",
    default: 5,
    parse: number(0, 600, { minExclusive: true }),
  }),
  setting({
    key: "discoveryGraceSecs",
    flag: "--discovery-grace-secs",
    arg: "<secs>",
    description:
      "A worker that leaves --worker-file or --worker-dns drains (no new requests, in-flight ones complete) and is removed after this long; back within it, it keeps its prefix tree (0 = remove at once).",
    default: 30,
    parse: number(0),
  }),
  ...KUBERNETES_SETTINGS,
  setting({
    key: "host",
    flag: "--host",
    arg: "<addr>",
    description: "Address to listen on.",
    default: "0.0.0.0",
    parse: text,
  }),
  setting({
    key: "port",
    flag: "--port",
    arg: "<port>",
    description: "Port to listen on (0 = any free port).",
    default: 30000,
    parse: port,
  }),
  setting({
    key: "policy",
    flag: "--policy",
    arg: "<name>",
    description: `Routing policy: ${POLICY_NAMES.join(" | ")}. aibrix_prefix, llmd_approx, precise_weighted (with --kv-events), chwbl and dynamo_cost are the seed systems' algorithms as scheduling profiles (docs/scheduling.md).`,
    default: "prefix_cost",
    parse: oneOf(POLICY_NAMES),
  }),
  setting({
    key: "schedulerConfig",
    flag: "--scheduler-config",
    arg: "<file>",
    description:
      "Scheduling profiles from a YAML or JSON file in the shape of GIE's EndpointPickerConfig (plugins: [{type, name, parameters}], schedulingProfiles: [{name, plugins: [{pluginRef, weight}]}]; docs/scheduling.md); its first profile routes instead of --policy. Checked at start: an error names the path in the file. Empty = none.",
    default: "",
    parse: schedulerConfigFile,
  }),
  setting({
    key: "cacheThreshold",
    flag: "--cache-threshold",
    arg: "<0..1>",
    description:
      "cache_aware: route to the best-matching worker when its match rate is above this.",
    default: 0.3,
    parse: number(0, 1),
  }),
  setting({
    key: "balanceAbsThreshold",
    flag: "--balance-abs-threshold",
    arg: "<n>",
    description:
      "cache_aware: imbalanced when max - min in-flight exceeds this (and the relative test holds).",
    default: 64,
    parse: number(0),
  }),
  setting({
    key: "balanceRelThreshold",
    flag: "--balance-rel-threshold",
    arg: "<x>",
    description:
      "cache_aware: imbalanced when max in-flight exceeds min x this (and the absolute test holds).",
    default: 1.5,
    parse: number(1),
  }),
  setting({
    key: "cacheLoadBound",
    flag: "--cache-load-bound",
    arg: "<x>",
    description:
      "cache_aware: a worker wins on prefix only while its in-flight is at most this x the mean in-flight + 1, so one hot prefix cannot pile onto one worker (0 = no bound, as the SGLang router). With --state-url: this replica's own in-flight counts.",
    default: 2,
    parse: (raw, flag) => {
      const value = number(0)(raw, flag);
      if (value !== 0 && value < 1)
        throw new ConfigError(flag, `must be 0 (no bound) or >= 1, got "${raw}"`);
      return value;
    },
  }),
  setting({
    key: "prefixCostQueueWeight",
    flag: "--prefix-cost-queue-weight",
    arg: "<x>",
    description:
      "prefix_cost: weight of the uncached prompt characters already queued on a worker (in-flight requests without a first byte yet) against this request's own uncached characters (below 1: chunked prefill overlaps them, and leaving a prefix's holder copies the prefix).",
    default: 0.5,
    parse: number(0),
  }),
  setting({
    key: "prefixCostRequestChars",
    flag: "--prefix-cost-request-chars",
    arg: "<chars>",
    description:
      "prefix_cost: characters of prefill each in-flight request on a worker counts for (its share of every engine step), so one hot prefix spreads over several workers.",
    default: 256,
    parse: number(0),
  }),
  setting({
    key: "prefixCostTieBreak",
    flag: "--prefix-cost-tie-break",
    arg: "<hash|rotation>",
    description:
      "prefix_cost: how near-equal costs are settled when some worker holds part of the text. hash = among the candidates within half of --prefix-cost-request-chars of the lowest cost, the one holding the most of the text, then a hash of the end of that prefix, so near-ties among its holders go to the same worker whatever the load of the moment; rotation = exact ties only, the less loaded, then in turn.",
    default: DEFAULT_TIE_BREAK,
    parse: oneOf(TIE_BREAKS),
  }),
  setting({
    key: "evictionIntervalSecs",
    flag: "--eviction-interval",
    arg: "<secs>",
    description:
      "Seconds between LRU eviction passes over every tree (0 = timer off; inserts still evict past 110% of a fixed budget, and past a learned one at once).",
    default: 120,
    parse: number(0),
  }),
  setting({
    key: "maxTreeSize",
    flag: "--max-tree-size",
    arg: "<chars|auto>",
    description:
      "Budget of each worker's prefix tree, in characters. auto = the worker's KV capacity in tokens (learned from its engine) x its characters per token x --tree-capacity-factor, kept exactly (no slack on insert); 67108864 (2^26) until a capacity is known. A number fixes the budget for every worker.",
    default: "auto",
    parse: (raw, flag) => (raw.trim().toLowerCase() === "auto" ? "auto" : integer(1)(raw, flag)),
  }),
  setting({
    key: "treeCapacityFactor",
    flag: "--tree-capacity-factor",
    arg: "<x>",
    description:
      "With --max-tree-size auto: multiplies each learned budget (below 1 the trees forget sooner than the engines, above 1 later).",
    default: 1,
    parse: number(0, 100, { minExclusive: true }),
  }),
  setting({
    key: "enginePollIntervalSecs",
    flag: "--engine-poll-interval-secs",
    arg: "<secs>",
    description:
      "Seconds between reads of every worker's engine signals (SGLang /get_server_info, /metrics, /v1/models), also read right after a worker is added (0 = off). Signals older than 3 intervals are ignored.",
    default: 5,
    parse: number(0),
  }),
  setting({
    key: "enginePollTimeoutSecs",
    flag: "--engine-poll-timeout-secs",
    arg: "<secs>",
    description: "Limit for one read of one engine endpoint.",
    default: 2,
    parse: number(0, Number.POSITIVE_INFINITY, { minExclusive: true }),
  }),
  setting({
    key: "prefixIndex",
    flag: "--prefix-index",
    arg: "<name>",
    description:
      "Prefix index: shared (one tree per model whose nodes record which workers hold them; a decision walks it once) | approx (one radix tree per worker; a decision walks every candidate's tree), the same answers to the character | block_hash (GIE/llm-d's and AIBrix's approximate index: chained hashes of fixed character blocks, an LRU of blocks per worker; matches in whole blocks).",
    default: "shared",
    parse: oneOf(PREFIX_INDEX_NAMES),
  }),
  setting({
    key: "blockHashChars",
    flag: "--block-hash-chars",
    arg: "<chars|auto>",
    description: `--prefix-index block_hash: characters a block (AIBrix's character blocks: 128). auto = GIE/llm-d's: the first vLLM worker's KV block size (vllm:cache_config_info block_size) x 4 characters a token, ${DEFAULT_BLOCK_CHARS} (16 tokens) until one reports it. A text's partial last block is not hashed.`,
    default: "auto",
    parse: (raw, flag) =>
      raw.trim().toLowerCase() === "auto" ? "auto" : integer(1, 1_048_576)(raw, flag),
  }),
  setting({
    key: "blockHashCapacity",
    flag: "--block-hash-capacity",
    arg: "<blocks>",
    description:
      "--prefix-index block_hash: blocks each worker's LRU holds (GIE's default, about 500k tokens of KV) until its engine's KV capacity is learned (--max-tree-size auto); a fixed --max-tree-size replaces it (its characters / --block-hash-chars).",
    default: DEFAULT_CAPACITY_BLOCKS,
    parse: integer(1, 1 << 30),
  }),
  setting({
    key: "maxPayloadSize",
    flag: "--max-payload-size",
    arg: "<bytes>",
    description:
      "Largest request body accepted; larger bodies get 413 before any worker is contacted.",
    default: 64 * 1024 * 1024,
    parse: integer(1),
  }),
  setting({
    key: "maxBodyBufferBytes",
    flag: "--max-body-buffer-bytes",
    arg: "<bytes>",
    description:
      "Request-body bytes buffered at once across all requests (a body is held until its request ends); a body that does not fit gets 503 body_buffer_full with Retry-After (0 = no budget; else >= --max-payload-size).",
    default: 1024 * 1024 * 1024,
    parse: integer(0),
  }),
  setting({
    key: "bodyReadTimeoutSecs",
    flag: "--body-read-timeout-secs",
    arg: "<secs>",
    description: "Limit for receiving a whole request body; beyond it 408 body_timeout.",
    default: 300,
    parse: number(0, Number.POSITIVE_INFINITY, { minExclusive: true }),
  }),
  setting({
    key: "bodyIdleTimeoutSecs",
    flag: "--body-idle-timeout-secs",
    arg: "<secs>",
    description:
      "Limit for silence between two chunks of a request body; beyond it 408 body_timeout.",
    default: 30,
    parse: number(0, Number.POSITIVE_INFINITY, { minExclusive: true }),
  }),
  setting({
    key: "bodyMinRateBytes",
    flag: "--body-min-rate-bytes",
    arg: "<bytes/s>",
    description:
      "Slowest average rate accepted for a request body once --body-idle-timeout-secs have passed (each byte extends the allowed time, like Apache's mod_reqtimeout MinRate); slower gets 408 body_timeout (0 = off).",
    default: 500,
    parse: number(0),
  }),
  setting({
    key: "bodyLingerSecs",
    flag: "--body-linger-secs",
    arg: "<secs>",
    description:
      "After an early error answer (413, 503, 401...) to a client still sending its body, keep reading and discarding the body this long so the client can read the answer (lingering close); then the connection is cut.",
    default: 10,
    parse: number(0),
  }),
  setting({
    key: "bodyLingerBytes",
    flag: "--body-linger-bytes",
    arg: "<bytes>",
    description:
      "Most body bytes read and discarded after an early error answer; past it the connection is cut.",
    default: 16 * 1024 * 1024,
    parse: integer(0),
  }),
  setting({
    key: "parseOffloadBytes",
    flag: "--parse-offload-bytes",
    arg: "<bytes>",
    description:
      "Request bodies of at least this size are parsed in a worker thread, so a huge body never stalls the event loop; smaller ones are parsed in line (cheaper than a hand-off).",
    default: 256 * 1024,
    parse: integer(1),
  }),
  setting({
    key: "parseWorkers",
    flag: "--parse-workers",
    arg: "<n>",
    description:
      "Worker threads that parse large request bodies, started on first use (0 = parse every body on the event loop).",
    default: 2,
    parse: integer(0, 64),
  }),
  setting({
    key: "parseWorkerMemoryMb",
    flag: "--parse-worker-memory-mb",
    arg: "<MB>",
    description:
      "Heap limit of each parse worker; a body whose parse needs more gets 413 and the worker is replaced.",
    default: 1024,
    parse: integer(16),
  }),
  setting({
    key: "maxRoutingTextChars",
    flag: "--max-routing-text-chars",
    arg: "<chars>",
    description:
      "Longest routing text (the prefix key) taken from one request, about 64k tokens by default: two prompts that share this much go to the same worker anyway, and it bounds the prefix index's work per request (inserting a fresh 1 Mi-character text took 20-27 ms, 256 Ki under 1 ms).",
    default: 256 * 1024,
    parse: integer(1),
  }),
  setting({
    key: "requestTimeoutSecs",
    flag: "--request-timeout-secs",
    arg: "<secs>",
    description: "Overall limit for one request, retries and streaming included.",
    default: 1800,
    parse: number(0, Number.POSITIVE_INFINITY, { minExclusive: true }),
  }),
  setting({
    key: "connectTimeoutSecs",
    flag: "--connect-timeout-secs",
    arg: "<secs>",
    description: "Limit for opening a connection to a worker.",
    default: 5,
    parse: number(0, Number.POSITIVE_INFINITY, { minExclusive: true }),
  }),
  setting({
    key: "firstByteTimeoutSecs",
    flag: "--first-byte-timeout-secs",
    arg: "<secs>",
    description:
      "Limit for a worker's response headers to a non-streaming request, from the start of an attempt (its headers come only when generation ends: prefill + max_tokens x time per token). A timeout counts against the worker's breaker.",
    default: 300,
    parse: number(0, Number.POSITIVE_INFINITY, { minExclusive: true }),
  }),
  setting({
    key: "streamFirstByteTimeoutSecs",
    flag: "--stream-first-byte-timeout-secs",
    arg: "<secs>",
    description:
      "Limit for a worker's response headers to a streaming request (engines send them before prefill; the first token is then bounded by --idle-timeout-secs). A timeout counts against the worker's breaker.",
    default: 60,
    parse: number(0, Number.POSITIVE_INFINITY, { minExclusive: true }),
  }),
  setting({
    key: "idleTimeoutSecs",
    flag: "--idle-timeout-secs",
    arg: "<secs>",
    description: "Limit for silence between two chunks of a worker's response body.",
    default: 120,
    parse: number(0, Number.POSITIVE_INFINITY, { minExclusive: true }),
  }),
  setting({
    key: "clientStallSecs",
    flag: "--client-stall-secs",
    arg: "<secs>",
    description:
      "Limit for a client that takes none of a response while its socket is full (it stopped reading): the request ends and the worker's slot is freed. 0 = no limit (only --request-timeout-secs).",
    default: 60,
    parse: number(0),
  }),
  setting({
    key: "retryMaxAttempts",
    flag: "--retry-max-attempts",
    arg: "<n>",
    description:
      "Attempts in all for one request (1 = no retry); retries go to workers not yet tried.",
    default: 3,
    parse: integer(1, 100),
  }),
  setting({
    key: "retryInitialBackoffMs",
    flag: "--retry-initial-backoff-ms",
    arg: "<ms>",
    description: "First retry backoff; doubles each retry, with full jitter.",
    default: 50,
    parse: number(0),
  }),
  setting({
    key: "retryMaxBackoffMs",
    flag: "--retry-max-backoff-ms",
    arg: "<ms>",
    description: "Largest retry backoff.",
    default: 5000,
    parse: number(0),
  }),
  setting({
    key: "maxCoolDownSecs",
    flag: "--max-cool-down-secs",
    arg: "<secs>",
    description:
      "A worker answering 429/503 with Retry-After gets no new requests for that long, at most this (0 = ignore Retry-After).",
    default: 60,
    parse: number(0),
  }),
  setting({
    key: "healthCheckIntervalSecs",
    flag: "--health-check-interval-secs",
    arg: "<secs>",
    description: "Seconds between active GET /health checks of every worker (0 = off).",
    default: 10,
    parse: number(0),
  }),
  setting({
    key: "healthCheckTimeoutSecs",
    flag: "--health-check-timeout-secs",
    arg: "<secs>",
    description: "Limit for one health check.",
    default: 5,
    parse: number(0, Number.POSITIVE_INFINITY, { minExclusive: true }),
  }),
  setting({
    key: "healthFailureThreshold",
    flag: "--health-failure-threshold",
    arg: "<n>",
    description: "Consecutive failed checks that mark a worker unhealthy.",
    default: 3,
    parse: integer(1),
  }),
  setting({
    key: "healthSuccessThreshold",
    flag: "--health-success-threshold",
    arg: "<n>",
    description: "Consecutive passed checks that mark an unhealthy worker healthy again.",
    default: 2,
    parse: integer(1),
  }),
  setting({
    key: "healthCheckEndpoint",
    flag: "--health-check-endpoint",
    arg: "<path>",
    description: "Path of the health check, after the worker's base URL.",
    default: "/health",
    parse: urlPath,
  }),
  setting({
    key: "cbFailureThreshold",
    flag: "--cb-failure-threshold",
    arg: "<n>",
    description:
      "Consecutive request failures (connection errors, timeouts, 5xx; never 4xx) that open a worker's circuit breaker.",
    default: 5,
    parse: integer(1),
  }),
  setting({
    key: "cbTimeoutSecs",
    flag: "--cb-timeout-secs",
    arg: "<secs>",
    description:
      "Seconds an open breaker waits before letting a trial request through (half-open).",
    default: 30,
    parse: number(0),
  }),
  setting({
    key: "cbSuccessThreshold",
    flag: "--cb-success-threshold",
    arg: "<n>",
    description: "Successful trial requests that close a half-open breaker.",
    default: 2,
    parse: integer(1),
  }),
  setting({
    key: "maxConcurrentRequests",
    flag: "--max-concurrent-requests",
    arg: "<n>",
    description: "Requests forwarded at once; more wait in a queue (0 or -1 = no limit).",
    default: 0,
    // -1 is the SGLang router's spelling of "no limit".
    parse: (raw, flag) => (raw.trim() === "-1" ? 0 : integer(0)(raw, flag)),
  }),
  setting({
    key: "queueSize",
    flag: "--queue-size",
    arg: "<n>",
    description:
      "With --max-concurrent-requests or --queue-when-saturated: requests that may wait in all; beyond it the lowest priority is refused with 429.",
    default: 1024,
    parse: integer(0),
  }),
  setting({
    key: "queueTimeoutSecs",
    flag: "--queue-timeout-secs",
    arg: "<secs>",
    description:
      "With --max-concurrent-requests or --queue-when-saturated: longest wait in the queue (a request's --queue-timeout-header may shorten it); beyond it 429 with Retry-After.",
    default: 60,
    parse: number(0, Number.POSITIVE_INFINITY, { minExclusive: true }),
  }),
  // Tenants, priorities, saturation and the fair queue: admission/settings.ts owns these rows.
  ...ADMISSION_SETTINGS,
  setting({
    key: "apiKey",
    flag: "--api-key",
    arg: "<key>",
    description:
      "Bearer key required on the data plane (/v1/*, /generate). Unset = open. As in SGLang, it is also the key sent to the --worker-urls workers unless --worker-api-key is given.",
    default: undefined,
    parse: key,
    secret: true,
  }),
  setting({
    key: "adminApiKey",
    flag: "--admin-api-key",
    arg: "<key>",
    description:
      "Bearer key required on the admin API. Unset = admin API answers loopback clients only.",
    default: undefined,
    parse: key,
    secret: true,
  }),
  setting({
    key: "workerApiKey",
    flag: "--worker-api-key",
    arg: "<key>",
    description:
      "Bearer key the router sends to workers started with --api-key (requests and health checks); wins over --api-key for the --worker-urls workers; a worker added with its own api_key uses that. Never logged.",
    default: undefined,
    parse: key,
    secret: true,
  }),
  setting({
    key: "allowLinkLocalWorkers",
    flag: "--allow-link-local-workers",
    arg: "[bool]",
    description:
      "Accept workers at link-local or cloud metadata addresses (169.254.0.0/16, fe80::/10, metadata.google.internal), refused by default.",
    default: false,
    parse: flagValue,
  }),
  setting({
    key: "logLevel",
    flag: "--log-level",
    arg: "<level>",
    description: `Log level: ${LOG_LEVELS.join(" | ")} (warning, critical: as warn, fatal).`,
    default: "info",
    parse: logLevel,
  }),
  setting({
    key: "requestIdHeaders",
    flag: "--request-id-headers",
    arg: "<name...>",
    description:
      "Request headers that carry a client's request id, first present wins (else one is generated); it is logged and sent on as x-request-id.",
    default: ["x-request-id"],
    parse: headerNames,
  }),
  setting({
    key: "prometheusPort",
    flag: "--prometheus-port",
    arg: "<port>",
    description: "Also serve /metrics on this port (it is always on the main port too).",
    default: undefined,
    parse: optionalPort,
  }),
  setting({
    key: "modelRouting",
    flag: "--model-routing",
    arg: "<mode>",
    description:
      "How a request's `model` picks workers. engine: as the engines treat names (a name some worker lists goes to those workers; a name none lists goes to the workers that accept any name, SGLang and workers listing no models; 404 only when there is none). strict: a name no worker lists gets the router's 404 once every worker's list is known.",
    default: "engine",
    parse: oneOf(MODEL_ROUTING_MODES),
  }),
  setting({
    key: "sessionAffinity",
    flag: "--session-affinity",
    arg: "<source>",
    description:
      "Keep a conversation on one worker while it is available: off | header (the --session-header value) | user (the OpenAI `user` body field). Composes with the policy: a new or moved session is routed by it.",
    default: "off",
    parse: oneOf(SESSION_SOURCES),
  }),
  setting({
    key: "sessionHeader",
    flag: "--session-header",
    arg: "<name>",
    description: "With --session-affinity header: the request header that names the session.",
    default: "x-session-id",
    parse: (raw, flag) => {
      const [name] = headerNames(raw, flag);
      return name!;
    },
  }),
  setting({
    key: "maxSessions",
    flag: "--max-sessions",
    arg: "<n>",
    description:
      "With --session-affinity: sessions remembered; past it the least recently used is forgotten.",
    default: 100000,
    parse: integer(1),
  }),
  setting({
    key: "shutdownGraceSecs",
    flag: "--shutdown-grace-secs",
    arg: "<secs>",
    description: "On SIGTERM/SIGINT, how long in-flight requests may take to finish.",
    default: 30,
    parse: number(0),
  }),
  setting({
    key: "kvEvents",
    flag: "--kv-events",
    arg: "[bool]",
    description:
      "Route on the engines' KV-cache events (vLLM/SGLang over ZMQ): a precise block index per worker, with the approximate trees as fallback. See docs/kv-events.md.",
    default: false,
    parse: flagValue,
  }),
  setting({
    key: "kvEventsEndpointTemplate",
    flag: "--kv-events-endpoint-template",
    arg: "<url>",
    description:
      "Each worker's KV-event publisher; {host} is the worker's host. The admin API can give one per worker (kv_events_endpoint).",
    default: "tcp://{host}:5557",
    parse: text,
  }),
  setting({
    key: "kvEventsReplayTemplate",
    flag: "--kv-events-replay-template",
    arg: "<url>",
    description:
      "Each worker's KV-event replay endpoint (asked for missed events after a gap); empty = none: a gap drops the worker's precise index until it is rebuilt.",
    default: "tcp://{host}:5558",
    parse: text,
  }),
  setting({
    key: "kvEventsAllowIpc",
    flag: "--kv-events-allow-ipc",
    arg: "[bool]",
    description:
      "Accept ipc:// KV-event endpoints from the admin API (kv_events_endpoint); refused by default, since a path lets a caller make the router connect to any local socket.",
    default: false,
    parse: flagValue,
  }),
  setting({
    key: "kvEventsReplayTimeoutMs",
    flag: "--kv-events-replay-timeout-ms",
    arg: "<ms>",
    description: "Longest wait for a replay answer.",
    default: 2000,
    parse: integer(1),
  }),
  setting({
    key: "kvEventsRebuildSecs",
    flag: "--kv-events-rebuild-secs",
    arg: "<secs>",
    description:
      "After events were lost (no replay), how long a worker routes on its approximate tree while its precise index is rebuilt.",
    default: 60,
    parse: number(0),
  }),
  setting({
    key: "kvEventsMaxMessageBytes",
    flag: "--kv-events-max-message-bytes",
    arg: "<bytes>",
    description:
      "Largest KV-event batch applied; a bigger one is refused undecoded and counted, and the worker's precise index rebuilds (an engine step publishes well under 1 MiB).",
    default: 4 * 1024 * 1024,
    parse: integer(1024),
  }),
  setting({
    key: "kvEventsDpSize",
    flag: "--kv-events-dp-size",
    arg: "<n>",
    description:
      "Data-parallel ranks per worker's engine (vLLM --data-parallel-size, SGLang --dp-size): rank r publishes on the endpoint's port + r, gets its own precise index, and requests carry the chosen rank (X-data-parallel-rank). A worker whose engine says more (SGLang /get_server_info dp_size, vLLM's /metrics engine labels) gets that many. See docs/kv-events.md.",
    default: 1,
    parse: integer(1, 64),
  }),
  setting({
    key: "kvIndexMaxBlocks",
    flag: "--kv-index-max-blocks",
    arg: "<n>",
    description: "Most KV blocks the precise index holds per worker (oldest dropped first).",
    default: 262_144,
    parse: integer(1),
  }),
  setting({
    key: "kvSpeculativeTtlMs",
    flag: "--kv-speculative-ttl-ms",
    arg: "<ms>",
    description:
      "A routed request's blocks count as held by its worker for this long, unless a BlockStored event confirms them first.",
    default: 2000,
    parse: integer(0),
  }),
  setting({
    key: "kvBlockSize",
    flag: "--kv-block-size",
    arg: "<tokens>",
    description:
      "Tokens per KV block assumed until a worker's first BlockStored event gives its own (vLLM default 16).",
    default: 16,
    parse: integer(1),
  }),
  setting({
    key: "tokenizeTimeoutMs",
    flag: "--tokenize-timeout-ms",
    arg: "<ms>",
    description:
      "With --kv-events: longest wait for the worker's /tokenize before a request routes on the approximate trees.",
    default: 50,
    parse: integer(1),
  }),
  setting({
    key: "tokenizerCacheTokens",
    flag: "--tokenizer-cache-tokens",
    arg: "<n>",
    description: "Tokens kept by the tokenizer cache (per prompt prefix), all entries together.",
    default: 4_000_000,
    parse: integer(0),
  }),
  setting({
    key: "tokenizerPath",
    flag: "--tokenizer-path",
    arg: "<tokenizer.json>",
    description:
      "With --kv-events: the model's Hugging Face tokenizer.json (or the directory holding it); prompt strings (completions, /generate) are tokenized in the router instead of by the worker's /tokenize; chat messages still use /tokenize (chat template). Empty = none.",
    default: "",
    parse: text,
  }),
  setting({
    key: "stateUrl",
    flag: "--state-url",
    arg: "<redis-url>",
    description:
      "Share routing decisions, in-flight counts and workers with other replicas through Redis 7 / Valkey, e.g. redis://10.0.0.5:6379/0 (rediss:// for TLS). Unset = this replica routes on its own state. Never logged (it may hold a password).",
    default: undefined,
    parse: stateUrl,
    secret: true,
  }),
  setting({
    key: "stateSecret",
    flag: "--state-secret",
    arg: "<secret>",
    description: `Required with --state-url: a secret shared by the fleet's replicas (at least ${MIN_STATE_SECRET_CHARS} characters, e.g. \`openssl rand -hex 32\`; best given as RADIXGATE_STATE_SECRET). Every update written to Redis is signed with it (HMAC) and peers drop what is not; workers' own API keys travel sealed with it (AES-256-GCM). Never logged.`,
    default: undefined,
    parse: stateSecret,
    secret: true,
  }),
  setting({
    key: "stateKeyPrefix",
    flag: "--state-key-prefix",
    arg: "<prefix>",
    description:
      "With --state-url: prefix of every Redis key, so several fleets can share one Redis (replicas of one fleet use the same).",
    default: "radixgate",
    parse: keyPrefix,
  }),
  setting({
    key: "stateMaxTextChars",
    flag: "--state-max-text-chars",
    arg: "<chars>",
    description:
      "With --state-url: characters of each routed text published to the other replicas (its first ones; the rest of a long prompt is not shared).",
    default: 16384,
    parse: integer(1, 1_048_576),
  }),
  setting({
    key: "stateStreamLength",
    flag: "--state-stream-length",
    arg: "<n>",
    description:
      "With --state-url: decisions kept in the Redis stream (approximately); a replica that starts or reconnects replays them.",
    default: 10000,
    parse: integer(1),
  }),
  setting({
    key: "stateLoadIntervalMs",
    flag: "--state-load-interval-ms",
    arg: "<ms>",
    description:
      "With --state-url: how often each replica publishes its in-flight counts and reads its peers' (a peer's count expires after 3 intervals).",
    default: 250,
    parse: integer(10, 60_000),
  }),
  setting({
    key: "stateQueueSize",
    flag: "--state-queue-size",
    arg: "<n>",
    description:
      "With --state-url: updates waiting to be published while Redis is slow or down; past it the oldest are dropped.",
    default: 10000,
    parse: integer(1),
  }),
  setting({
    key: "stateClaimTimeoutMs",
    flag: "--state-claim-timeout-ms",
    arg: "<ms>",
    description:
      "With --state-url: how long a request that starts a new prefix waits for its claim in Redis (the first replica to claim a prefix names its worker, the others follow it); past it this replica's own choice stands. 0 = no claims.",
    default: 50,
    parse: integer(0, 10_000),
  }),
  setting({
    key: "stateClaimTtlMs",
    flag: "--state-claim-ttl-ms",
    arg: "<ms>",
    description:
      "With --state-url: how long a new-prefix claim lives in Redis; long enough for its decision to reach every replica through the ops stream.",
    default: 2000,
    parse: integer(10, 600_000),
  }),
  ...PD_SETTINGS,
  ...CACHE_ACCOUNT_SETTINGS,
  ...TRACING_SETTINGS,
] as const satisfies readonly Setting[];

/** `--worker-urls` → `RADIXGATE_WORKER_URLS`. */
export function envName(flag: string): string {
  return `RADIXGATE_${flag.replace(/^--/, "").replace(/-/g, "_").toUpperCase()}`;
}

export function defaultConfig(): Config {
  const config = {} as Record<string, unknown>;
  for (const s of SETTINGS) config[s.key] = Array.isArray(s.default) ? [...s.default] : s.default;
  return config as unknown as Config;
}

/** Checks that involve more than one setting. */
export function validateConfig(config: Config): Config {
  if (config.retryMaxBackoffMs < config.retryInitialBackoffMs) {
    throw new ConfigError(
      "--retry-max-backoff-ms",
      `must be >= --retry-initial-backoff-ms (${config.retryInitialBackoffMs}), got ${config.retryMaxBackoffMs}`,
    );
  }
  if (
    config.prometheusPort !== undefined &&
    config.prometheusPort !== 0 &&
    config.prometheusPort === config.port
  ) {
    throw new ConfigError("--prometheus-port", `must differ from --port (${config.port})`);
  }
  if (config.maxBodyBufferBytes !== 0 && config.maxBodyBufferBytes < config.maxPayloadSize) {
    throw new ConfigError(
      "--max-body-buffer-bytes",
      `must be 0 (no budget) or >= --max-payload-size (${config.maxPayloadSize}), got ${config.maxBodyBufferBytes}`,
    );
  }
  if (config.stateUrl !== undefined) requireStateSecret(config);
  validateKubernetesSettings(config);
  if (new Set(config.workerUrls).size !== config.workerUrls.length) {
    throw new ConfigError("--worker-urls", "lists the same worker twice");
  }
  validatePdConfig(config);
  return config;
}

/**
 * Builds a Config from raw strings keyed by setting key (from flags or env), applying defaults.
 * Throws ConfigError naming the flag on the first invalid value.
 */
export function parseConfig(raw: Partial<Record<keyof Config, string | string[]>>): Config {
  const config = defaultConfig() as unknown as Record<string, unknown>;
  for (const s of SETTINGS) {
    const value = raw[s.key];
    if (value === undefined) continue;
    const joined = Array.isArray(value) ? value.join(" ") : value;
    config[s.key] = (s.parse as Parser<unknown>)(joined, s.flag);
  }
  return validateConfig(config as unknown as Config);
}
