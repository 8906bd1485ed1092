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

/**
 * Header names a `Connection` header lists: hop-by-hop for this one connection (RFC 9110
 * §7.6.1), so a proxy must drop them, e.g. `Connection: x-debug` with an `X-Debug` header. One
 * name (the usual `keep-alive` or `close`, on nearly every request and answer) comes as itself,
 * without a Set.
 */
function connectionNamed(value: string | string[] | undefined): Set<string> | string | undefined {
  if (value === undefined) return undefined;
  if (typeof value === "string" && !value.includes(",")) {
    const name = value.trim().toLowerCase();
    return name === "" ? undefined : name;
  }
  const names = new Set<string>();
  for (const part of Array.isArray(value) ? value : [value]) {
    for (const token of part.split(",")) {
      const name = token.trim().toLowerCase();
      if (name !== "") names.add(name);
    }
  }
  return names.size > 0 ? names : undefined;
}

/** Whether `name` is among those connectionNamed found. */
function isNamed(named: Set<string> | string | undefined, name: string): boolean {
  if (named === undefined) return false;
  return typeof named === "string" ? named === name : named.has(name);
}

/** This router's entry in the Via header (RFC 9110 §7.6.3): `1.1 radixgate-<instance id>`. */
export function viaToken(instanceId: string): string {
  return `1.1 radixgate-${instanceId}`;
}

/** Whether a Via header shows the request already passed the router with this token. */
export function hasPassedThrough(via: string | string[] | undefined, token: string): boolean {
  if (via === undefined) return false;
  const pseudonym = token.slice(token.indexOf(" ") + 1);
  for (const header of Array.isArray(via) ? via : [via]) {
    for (const entry of header.split(",")) {
      // An entry is "<protocol> <pseudonym> [comment]".
      if (entry.trim().split(/\s+/)[1] === pseudonym) return true;
    }
  }
  return false;
}

/** The client's headers as sent on to a worker, with this router appended to Via. */
export function upstreamRequestHeaders(
  incoming: IncomingHttpHeaders,
  requestId: string,
  forwardAuthorization: boolean,
  via?: string,
): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  const named = connectionNamed(incoming.connection);
  for (const name in incoming) {
    const value = incoming[name];
    if (value === undefined || HOP_BY_HOP.has(name) || isNamed(named, name)) continue;
    if (name === "authorization" && !forwardAuthorization) continue;
    out[name] = value;
  }
  out["x-request-id"] = requestId;
  if (via !== undefined) {
    const previous = out.via;
    out.via = previous === undefined ? via : `${[previous].flat().join(", ")}, ${via}`;
  }
  return out;
}

/** The headers for one worker: its own key replaces whatever Authorization the client sent. */
export function withWorkerAuth(
  headers: Record<string, string | string[]>,
  authorization: string | undefined,
): Record<string, string | string[]> {
  return authorization === undefined ? headers : { ...headers, authorization };
}

/** The worker's response headers as sent to the client, plus the router's own. */
export function responseHeaders(
  upstream: Record<string, string | string[] | undefined>,
  workerId: string,
  route: string,
  requestId: string,
): OutgoingHttpHeaders {
  const out = passedResponseHeaders(upstream);
  out["x-radixgate-worker"] = workerId;
  out["x-radixgate-route"] = route;
  out["x-request-id"] = requestId;
  return out;
}

/** An answer's headers as a proxy passes them on: hop-by-hop ones left out, its length kept. */
export function passedResponseHeaders(
  upstream: Record<string, string | string[] | undefined>,
): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  const named = connectionNamed(upstream.connection);
  for (const name in upstream) {
    const value = upstream[name];
    if (value === undefined || (HOP_BY_HOP.has(name) && name !== "content-length")) continue;
    if (isNamed(named, name)) continue;
    out[name] = value;
  }
  return out;
}
