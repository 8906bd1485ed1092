import type { IncomingHttpHeaders } from "node:http";

/** Where a request's conversation id comes from (--session-affinity). */
export type SessionSource = "off" | "header" | "user";
export const SESSION_SOURCES: readonly SessionSource[] = ["off", "header", "user"];

/** Longer ids are ignored (routed without affinity) rather than kept in memory. */
const MAX_SESSION_CHARS = 256;

/**
 * The session id of a request: the `--session-header` header, or the OpenAI `user` field of the
 * body (which OpenAI clients set per end user). undefined when absent, empty or too long.
 */
export function sessionKey(
  source: SessionSource,
  headerName: string,
  headers: IncomingHttpHeaders,
  user: string | undefined,
): string | undefined {
  let value: unknown;
  if (source === "header") value = headers[headerName];
  else if (source === "user") value = user;
  if (typeof value !== "string" || value === "" || value.length > MAX_SESSION_CHARS)
    return undefined;
  return value;
}
