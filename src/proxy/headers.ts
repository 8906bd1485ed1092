import type { IncomingHttpHeaders, OutgoingHttpHeaders } from "node:http";

/** Connection-level headers that must not cross a proxy (RFC 9110 §7.6.1), plus ones undici sets itself. */
const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-authenticate",
  "proxy-authorization",
  "proxy-connection",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "host",
  "content-length",
  "expect",
]);

/** The client's headers as sent on to a worker. */
export function upstreamRequestHeaders(
  incoming: IncomingHttpHeaders,
  requestId: string,
  forwardAuthorization: boolean,
): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const name in incoming) {
    const value = incoming[name];
    if (value === undefined || HOP_BY_HOP.has(name)) continue;
    if (name === "authorization" && !forwardAuthorization) continue;
    out[name] = value;
  }
  out["x-request-id"] = requestId;
  return out;
}

/** The worker's response headers as sent to the client, plus the router's own. */
export function responseHeaders(
  upstream: Record<string, string | string[] | undefined>,
  workerId: string,
  route: string,
  requestId: string,
): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  for (const name in upstream) {
    const value = upstream[name];
    if (value === undefined || (HOP_BY_HOP.has(name) && name !== "content-length")) continue;
    out[name] = value;
  }
  out["x-radixgate-worker"] = workerId;
  out["x-radixgate-route"] = route;
  out["x-request-id"] = requestId;
  return out;
}
