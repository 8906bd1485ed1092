/**
 * The forwarder's settings (timeouts, retries, cool-downs). `forwardSettings` makes the
 * Forwarder's options from them.
 */
import { randomBytes } from "node:crypto";
import { integer, number, SEC, seconds } from "../config-kit/parsers.js";
import { section } from "../config-kit/setting.js";
import { ConfigError } from "../errors.js";
import type { ModelRoutingMode } from "../workers/served-models.js";

export interface ProxyConfig {
  requestTimeoutMs: number;
  /** First-byte limit of a non-streaming request (its headers come when generation ends). */
  firstByteTimeoutMs: number;
  /** First-byte limit of a streaming request (engines send headers before prefill). */
  streamFirstByteTimeoutMs: number;
  idleTimeoutMs: number;
  /** --client-stall-secs in ms: a client that takes nothing for this long is cut; 0 = off. */
  clientStallMs: number;
  retryMaxAttempts: number;
  retryInitialBackoffMs: number;
  retryMaxBackoffMs: number;
  /** Longest cool-down a worker's Retry-After imposes (0 = ignore Retry-After). */
  maxCoolDownMs: number;
}

/** The Forwarder's options: the proxy section plus what the process and other sections decide. */
export interface ForwardSettings extends ProxyConfig {
  /** This router process's id in the Via hop marker (loop detection). */
  instanceId: string;
  /** Forward the client's Authorization header to workers (only when the router has no key of its own). */
  forwardAuthorization: boolean;
  /** How the request's model picks workers (--model-routing; workers/served-models.ts). */
  modelRouting: ModelRoutingMode;
}

export const PROXY_SETTINGS = section<ProxyConfig>(
  {
    requestTimeoutMs: {
      flag: "--request-timeout-secs",
      arg: "<secs>",
      description: "Overall limit for one request, retries and streaming included.",
      default: 1800 * SEC,
      parse: seconds(0, Number.POSITIVE_INFINITY, { minExclusive: true }),
    },
    firstByteTimeoutMs: {
      flag: "--first-byte-timeout-secs",
      arg: "<secs>",
      description:
        "Limit for a worker's response headers to a non-streaming request, from the start of an attempt (its headers come only when generation ends: prefill + max_tokens x time per token). A timeout counts against the worker's breaker.",
      default: 300 * SEC,
      parse: seconds(0, Number.POSITIVE_INFINITY, { minExclusive: true }),
    },
    streamFirstByteTimeoutMs: {
      flag: "--stream-first-byte-timeout-secs",
      arg: "<secs>",
      description:
        "Limit for a worker's response headers to a streaming request (engines send them before prefill; the first token is then bounded by --idle-timeout-secs). A timeout counts against the worker's breaker.",
      default: 60 * SEC,
      parse: seconds(0, Number.POSITIVE_INFINITY, { minExclusive: true }),
    },
    idleTimeoutMs: {
      flag: "--idle-timeout-secs",
      arg: "<secs>",
      description: "Limit for silence between two chunks of a worker's response body.",
      default: 120 * SEC,
      parse: seconds(0, Number.POSITIVE_INFINITY, { minExclusive: true }),
    },
    clientStallMs: {
      flag: "--client-stall-secs",
      arg: "<secs>",
      description:
        "Limit for a client that takes none of a response while its socket is full (it stopped reading): the request ends and the worker's slot is freed. 0 = no limit (only --request-timeout-secs).",
      default: 60 * SEC,
      parse: seconds(0),
    },
    retryMaxAttempts: {
      flag: "--retry-max-attempts",
      arg: "<n>",
      description:
        "Attempts in all for one request (1 = no retry); retries go to workers not yet tried.",
      default: 3,
      parse: integer(1, 100),
    },
    retryInitialBackoffMs: {
      flag: "--retry-initial-backoff-ms",
      arg: "<ms>",
      description: "First retry backoff; doubles each retry, with full jitter.",
      default: 50,
      parse: number(0),
    },
    retryMaxBackoffMs: {
      flag: "--retry-max-backoff-ms",
      arg: "<ms>",
      description: "Largest retry backoff.",
      default: 5000,
      parse: number(0),
    },
    maxCoolDownMs: {
      flag: "--max-cool-down-secs",
      arg: "<secs>",
      description:
        "A worker answering 429/503 with Retry-After gets no new requests for that long, at most this (0 = ignore Retry-After).",
      default: 60 * SEC,
      parse: seconds(0),
    },
  },
  (s) => {
    if (s.retryMaxBackoffMs < s.retryInitialBackoffMs) {
      throw new ConfigError(
        "--retry-max-backoff-ms",
        `must be >= --retry-initial-backoff-ms (${s.retryInitialBackoffMs}), got ${s.retryMaxBackoffMs}`,
      );
    }
  },
);

/** The Forwarder's options: its settings, this process's id, and how keys and models route. */
export function forwardSettings(
  config: ProxyConfig,
  others: { apiKey: string | undefined; modelRouting: ModelRoutingMode },
): ForwardSettings {
  return {
    ...config,
    // Random per process: two replicas in a chain are not a loop, one router twice is.
    instanceId: randomBytes(4).toString("hex"),
    forwardAuthorization: others.apiKey === undefined,
    modelRouting: others.modelRouting,
  };
}
