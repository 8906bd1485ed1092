import { createHash } from "node:crypto";

/**
 * Canonical form of a worker base URL: http(s) only, no credentials, query or fragment, no
 * trailing slash. Two spellings of one worker (`http://a:1/` and `http://A:1`) compare equal.
 */
export function normalizeWorkerUrl(input: string): string {
  let url: URL;
  try {
    url = new URL(input.trim());
  } catch {
    throw new Error(`is not a valid URL: "${input}" (expected e.g. http://10.0.0.1:30000)`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new Error(`must use http or https, got "${input}"`);
  }
  if (url.username !== "" || url.password !== "") {
    throw new Error(`must not contain credentials: "${url.host}"`);
  }
  if (url.search !== "" || url.hash !== "") {
    throw new Error(`must not have a query or fragment: "${input}"`);
  }
  const path = url.pathname.replace(/\/+$/, "");
  return `${url.protocol}//${url.host}${path}`;
}

/** A short id that stays the same for the same URL across restarts and router replicas. */
export function workerIdFor(normalizedUrl: string): string {
  return createHash("sha256").update(normalizedUrl).digest("hex").slice(0, 10);
}
