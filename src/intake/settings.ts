/**
 * What intake/ reads from the flags: the request body's bounds, parsing off the event loop, the
 * routing text and sessions. `intakeOptions` makes the Intake's options from them.
 */
import { headerName, integer, number, oneOf, SEC, seconds } from "../config-kit/parsers.js";
import { section } from "../config-kit/setting.js";
import { ConfigError } from "../errors.js";
import type { ModelRoutingMode } from "../workers/served-models.js";
import { CACHE_ISOLATIONS, type CacheIsolation } from "./cache-salt.js";
import type { IntakeOptions } from "./intake.js";
import { SESSION_SOURCES, type SessionSource } from "./session-key.js";

export interface IntakeConfig {
  maxPayloadSize: number;
  /** Router-wide budget of buffered request bodies (0 = none). */
  maxBodyBufferBytes: number;
  /** One client address's share of that budget (0 = no per-address bound). */
  maxBodyBufferBytesPerClient: number;
  bodyReadTimeoutMs: number;
  bodyIdleTimeoutMs: number;
  bodyMinRateBytes: number;
  largeBodyBytes: number;
  /** Large bodies read at once (0 = no bound). */
  maxLargeBodyReads: number;
  largeBodyWaitMs: number;
  parseOffloadBytes: number;
  /** Child processes parsing large bodies (0 = none). */
  parseWorkers: number;
  parseWorkerMemoryMb: number;
  maxRoutingTextChars: number;
  sessionAffinity: SessionSource;
  sessionHeader: string;
  /** Sessions remembered with --session-affinity (the decider's session table). */
  maxSessions: number;
  cacheIsolation: CacheIsolation;
}

export const INTAKE_SETTINGS = section<IntakeConfig>(
  {
    maxPayloadSize: {
      flag: "--max-payload-size",
      arg: "<bytes>",
      description:
        "Largest request body accepted; larger bodies get 413 before any worker is contacted.",
      default: 64 * 1024 * 1024,
      parse: integer(1),
    },
    maxBodyBufferBytes: {
      flag: "--max-body-buffer-bytes",
      arg: "<bytes>",
      description:
        "Request-body bytes buffered at once across all requests (a body is held until its request ends); a body that does not fit gets 503 body_buffer_full with Retry-After (0 = no budget; else >= --max-payload-size).",
      default: 1024 * 1024 * 1024,
      parse: integer(0),
    },
    maxBodyBufferBytesPerClient: {
      flag: "--max-body-buffer-bytes-per-client",
      arg: "<bytes>",
      description:
        "Request-body bytes one client address may have buffered at once, never less than --max-payload-size (a client behind a shared proxy address shares it); past it 503 body_buffer_full with Retry-After (0 = no per-address bound).",
      default: 256 * 1024 * 1024,
      parse: integer(0),
    },
    bodyReadTimeoutMs: {
      flag: "--body-read-timeout-secs",
      arg: "<secs>",
      description: "Limit for receiving a whole request body; beyond it 408 body_timeout.",
      default: 300 * SEC,
      parse: seconds(0, Number.POSITIVE_INFINITY, { minExclusive: true }),
    },
    bodyIdleTimeoutMs: {
      flag: "--body-idle-timeout-secs",
      arg: "<secs>",
      description:
        "Limit for silence between two chunks of a request body; beyond it 408 body_timeout.",
      default: 30 * SEC,
      parse: seconds(0, Number.POSITIVE_INFINITY, { minExclusive: true }),
    },
    bodyMinRateBytes: {
      flag: "--body-min-rate-bytes",
      arg: "<bytes/s>",
      description:
        "Slowest average rate accepted for a request body once --body-idle-timeout-secs have passed (each byte extends the allowed time, like Apache's mod_reqtimeout MinRate); a body with a Content-Length must also keep the pace that ends it within --body-read-timeout-secs; slower gets 408 body_timeout (0 = off).",
      default: 500,
      parse: number(0),
    },
    largeBodyBytes: {
      flag: "--large-body-bytes",
      arg: "<bytes>",
      description:
        "A request body declared larger than this, or grown larger as it arrives, is large: at most --max-large-body-reads large bodies are read at once.",
      default: 1024 * 1024,
      parse: integer(0),
    },
    maxLargeBodyReads: {
      flag: "--max-large-body-reads",
      arg: "<n>",
      description:
        "Large request bodies (--large-body-bytes) read at once; the others wait their turn with their connection paused (TCP backpressure: the client cannot send, neither side spends CPU), at most --large-body-wait-secs, then 503 large_body_busy with Retry-After. Smaller bodies never wait (0 = no bound).",
      default: 4,
      parse: integer(0),
    },
    largeBodyWaitMs: {
      flag: "--large-body-wait-secs",
      arg: "<secs>",
      description:
        "Limit for a large request body's wait for its turn to be read (--max-large-body-reads); beyond it 503 large_body_busy with Retry-After.",
      default: 30 * SEC,
      parse: seconds(0, Number.POSITIVE_INFINITY, { minExclusive: true }),
    },
    parseOffloadBytes: {
      flag: "--parse-offload-bytes",
      arg: "<bytes>",
      description:
        "Request bodies of at least this size are parsed in a child process, so a huge body never stalls the event loop; smaller ones are parsed in line (cheaper than a hand-off).",
      default: 256 * 1024,
      parse: integer(1),
    },
    parseWorkers: {
      flag: "--parse-workers",
      arg: "<n>",
      description:
        "Child processes that parse large request bodies, started on first use (0 = parse every body on the event loop).",
      default: 2,
      parse: integer(0, 64),
    },
    parseWorkerMemoryMb: {
      flag: "--parse-worker-memory-mb",
      arg: "<MB>",
      description:
        "Heap limit of each parse process; a body whose parse needs more gets 413 and the process is replaced (only that process ends, never the router).",
      default: 1024,
      parse: integer(16),
    },
    maxRoutingTextChars: {
      flag: "--max-routing-text-chars",
      arg: "<chars>",
      description:
        "Longest routing text (the prefix key) taken from one request, about 64k tokens by default: two prompts that share this much go to the same worker anyway, and it bounds the prefix index's work per request (inserting a fresh 1 Mi-character text took 20-27 ms, 256 Ki under 1 ms).",
      default: 256 * 1024,
      parse: integer(1),
    },
    sessionAffinity: {
      flag: "--session-affinity",
      arg: "<source>",
      description:
        "Keep a conversation on one worker while it is available: off | header (the --session-header value) | user (the OpenAI `user` body field). Composes with the policy: a new or moved session is routed by it.",
      default: "off",
      parse: oneOf(SESSION_SOURCES),
    },
    sessionHeader: {
      flag: "--session-header",
      arg: "<name>",
      description: "With --session-affinity header: the request header that names the session.",
      default: "x-session-id",
      parse: headerName,
    },
    cacheIsolation: {
      flag: "--cache-isolation",
      arg: "<mode>",
      description:
        "none | tenant: with tenant, each tenant's requests carry a salt of its own to the engines (vLLM and SGLang cache_salt on /v1/*, SGLang extra_key on /generate; one the client sent is overridden) and are indexed under it, so tenants never share cached prompt blocks nor learn from each other's hits. The tenant is read as admission reads it (--tenant-header, else the API key). See docs/reliability.md, tenant isolation.",
      default: "none",
      parse: oneOf(CACHE_ISOLATIONS),
    },
    maxSessions: {
      flag: "--max-sessions",
      arg: "<n>",
      description:
        "With --session-affinity: sessions remembered; past it the least recently used is forgotten.",
      default: 100000,
      parse: integer(1),
    },
  },
  (s) => {
    if (s.maxBodyBufferBytes !== 0 && s.maxBodyBufferBytes < s.maxPayloadSize) {
      throw new ConfigError(
        "--max-body-buffer-bytes",
        `must be 0 (no budget) or >= --max-payload-size (${s.maxPayloadSize}), got ${s.maxBodyBufferBytes}`,
      );
    }
  },
);

/** One client address's share of the body budget: never below one maximal body (0 = none). */
export function bodyShareOfClient(perClient: number, maxPayloadSize: number): number {
  return perClient === 0 ? 0 : Math.max(perClient, maxPayloadSize);
}

/** The Intake's options: its settings, and what other features decide about a request. */
export function intakeOptions(
  config: IntakeConfig,
  others: { withTokenizeInput: boolean; modelRouting: ModelRoutingMode },
): IntakeOptions {
  return {
    body: {
      maxBytes: config.maxPayloadSize,
      totalTimeoutMs: config.bodyReadTimeoutMs,
      idleTimeoutMs: config.bodyIdleTimeoutMs,
      minBytesPerSec: config.bodyMinRateBytes,
    },
    largeBodies: {
      bytes: config.largeBodyBytes,
      reads: config.maxLargeBodyReads,
      waitMs: config.largeBodyWaitMs,
    },
    parseOffloadBytes: config.parseOffloadBytes,
    maxRoutingTextChars: config.maxRoutingTextChars,
    withTokenizeInput: others.withTokenizeInput,
    sessionAffinity: config.sessionAffinity,
    sessionHeader: config.sessionHeader,
    modelRouting: others.modelRouting,
    cacheIsolation: config.cacheIsolation,
  };
}
