/** What the HTTP routes read: the client and admin keys, request ids, lingering after an early answer. */
import { headerNames, integer, key, type Parser, SEC, seconds } from "../config-kit/parsers.js";
import { section } from "../config-kit/setting.js";
import { ConfigError } from "../errors.js";
import type { BearerKey } from "./auth.js";

export interface RoutesConfig {
  /** Bearer key of the data plane; undefined = open. */
  apiKey: string | undefined;
  adminApiKey: string | undefined;
  requestIdHeaders: string[];
  bodyLingerMs: number;
  bodyLingerBytes: number;
  maxResponseIds: number;
  responseIdTtlMs: number;
  /** --cors-allowed-origins: the origins browsers may call from; empty = any (SGLang's default). */
  corsAllowedOrigins: string[];
}

/** The routes' options: their settings, and what they report of other features. */
export interface RouteOptions extends Omit<RoutesConfig, "apiKey" | "adminApiKey"> {
  /** --api-key, as its digest; undefined = the data plane is open. */
  readonly apiKey: BearerKey | undefined;
  /** --admin-api-key, as its digest; undefined = loopback clients only. */
  readonly adminApiKey: BearerKey | undefined;
  /** --model-routing, shown by /debug/route. */
  readonly modelRouting: string;
  /** Limit for one worker's /v1/models answer (the health check's timeout). */
  readonly modelsTimeoutMs: number;
  /** --queue-timeout-secs, which a request's --queue-timeout-header may shorten. */
  readonly queueTimeoutMs: number;
  readonly queueTimeoutHeader: string;
  /** --queue-wait-header: the response header carrying the wait in the admission queue; undefined = none. */
  readonly queueWaitHeader: string | undefined;
  /**
   * --explain-header is set: the operator chose to show every client what the cache holds for
   * its prompt, so the match rate goes in x-radixgate-route too (else only to admin clients).
   */
  readonly explainMatch: boolean;
  /** Prefill/decode disaggregation: a request needs a pair (readiness asks for both sides). */
  readonly pairs: boolean;
}

/** Origins as a browser sends them (scheme://host[:port]), space- or comma-separated. */
const origins: Parser<string[]> = (raw, flag) => {
  const list = raw.split(/[\s,]+/).filter((o) => o !== "");
  for (const o of list) {
    let ok = false;
    try {
      ok = new URL(o).origin === o;
    } catch {}
    if (!ok) throw new ConfigError(flag, `"${o}" is not an origin like https://app.example.com`);
  }
  return list;
};

export const ROUTES_SETTINGS = section<RoutesConfig>({
  apiKey: {
    flag: "--api-key",
    arg: "<key>",
    description:
      "Bearer key required on the data plane (/v1/*, /generate). Unset = open. As in SGLang, it is also the key sent to the --worker-urls workers unless --worker-api-key is given.",
    default: undefined,
    parse: key,
    secret: true,
  },
  adminApiKey: {
    flag: "--admin-api-key",
    arg: "<key>",
    description:
      "Bearer key required on the admin API. Unset = admin API answers loopback clients only.",
    default: undefined,
    parse: key,
    secret: true,
  },
  corsAllowedOrigins: {
    flag: "--cors-allowed-origins",
    arg: "<origin...>",
    description:
      "Browser origins allowed to call the data plane and the health, model and info routes (CORS). Unset = any origin, as SGLang's gateway (Access-Control-Allow-Origin: *). The admin API never answers cross-origin requests.",
    default: [],
    parse: origins,
  },
  requestIdHeaders: {
    flag: "--request-id-headers",
    arg: "<name...>",
    description:
      "Request headers that carry a client's request id, first present wins (else one is generated); it is logged and sent on as x-request-id.",
    default: ["x-request-id"],
    parse: headerNames,
  },
  bodyLingerMs: {
    flag: "--body-linger-secs",
    arg: "<secs>",
    description:
      "After an early error answer (413, 503, 401...) to a client still sending its body, keep reading and discarding the body this long so the client can read the answer (lingering close); then the connection is cut.",
    default: 10 * SEC,
    parse: seconds(0),
  },
  bodyLingerBytes: {
    flag: "--body-linger-bytes",
    arg: "<bytes>",
    description:
      "Most body bytes read and discarded after an early error answer; past it the connection is cut.",
    default: 16 * 1024 * 1024,
    parse: integer(0),
  },
  maxResponseIds: {
    flag: "--max-response-ids",
    arg: "<n>",
    description:
      "Responses API: most response ids remembered with the worker that produced them, so that a request with previous_response_id goes to the worker holding it (the oldest is forgotten first; 0 = none remembered).",
    default: 100_000,
    parse: integer(0),
  },
  responseIdTtlMs: {
    flag: "--response-id-ttl-secs",
    arg: "<secs>",
    description:
      "Responses API: how long a response id is remembered with its worker; an older previous_response_id is routed like any request.",
    default: 3600 * SEC,
    parse: seconds(1),
  },
});
