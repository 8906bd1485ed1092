import { createHash } from "node:crypto";
import { isIP } from "node:net";
import { ipv4MappedAddress, isLinkLocalIp, isLoopbackName } from "./ip-address.js";

export { isLinkLocalIp } from "./ip-address.js";

/**
 * Canonical form of a worker base URL: http(s) only, no credentials, query or fragment, no
 * trailing slash, no trailing `/v1`. Spellings of one worker compare equal: host case and a
 * trailing dot, default ports (`http://a:80` = `http://a`), IPv4 written as a number or in hex
 * (`http://2130706433` = `http://127.0.0.1`, done by the WHATWG URL parser) and IPv4-mapped IPv6
 * (`http://[::ffff:127.0.0.1]` and `http://[::ffff:7f00:1]` = `http://127.0.0.1`). Loopback names
 * and addresses keep their spelling here (a server may listen on ::1 only); `workerIdentity`
 * is what compares them.
 *
 * A base URL ending in `/v1` (an OpenAI-style base URL pasted as a worker) is normalised to the
 * server root: the router appends `/v1/chat/completions` itself, and `/generate`, `/health` and
 * `/get_model_info` live at the root of SGLang and vLLM, so keeping `/v1` would 404 them.
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
  if (url.hostname === "") throw new Error(`has no host: "${input}"`);
  const host = canonicalHost(url.hostname);
  const port = url.port === "" ? "" : `:${url.port}`;
  const path = url.pathname
    .replace(/\/{2,}/g, "/")
    .replace(/\/+$/, "")
    .replace(/\/v1$/i, "");
  if (/\/v1\//i.test(`${path}/`)) {
    throw new Error(
      `looks like an endpoint, not a server: "${input}" (give the base URL, e.g. http://10.0.0.1:30000; the router adds /v1/... itself)`,
    );
  }
  return `${url.protocol}//${host}${port}${path}`;
}

/** The hostname as it appears in a canonical URL (IPv6 in brackets, IPv4-mapped as IPv4). */
function canonicalHost(hostname: string): string {
  const name = hostname.replace(/\.$/, "");
  if (!name.startsWith("[")) return name;
  return ipv4MappedAddress(name) ?? name;
}

const METADATA_HOSTS = new Set(["metadata.google.internal", "metadata.goog", "metadata"]);

/**
 * Why a canonical worker URL points at a link-local or cloud-metadata address, or undefined.
 * Such a "worker" is almost always a mistake or an attempt to reach credentials (SSRF), so the
 * registry refuses it unless --allow-link-local-workers is set. Every spelling counts: IPv4 in
 * decimal or hex (the URL parser reads them), and IPv6 forms that carry the IPv4 address
 * (`[::169.254.169.254]`, NAT64 `[64:ff9b::a9fe:a9fe]`, ...; see ip-address.ts).
 */
export function linkLocalReason(normalizedUrl: string): string | undefined {
  return linkLocalHostReason(new URL(normalizedUrl).hostname);
}

/** The same judgement for a bare host (name, IPv4, or IPv6 with or without brackets). */
export function linkLocalHostReason(host: string): string | undefined {
  const name = host.toLowerCase().replace(/\.$/, "");
  if (METADATA_HOSTS.has(name)) return `${name} is a cloud metadata host`;
  const ip = name.startsWith("[") ? name.slice(1, -1) : name;
  if (isLinkLocalIp(ip)) return `${ip} is a link-local or cloud metadata address`;
  return undefined;
}

/**
 * What makes two canonical worker URLs the same worker: scheme, host, port (default ports
 * written out) and base path, where the host is the address the socket reaches. Only spellings
 * of one address meet: localhost (and *.localhost) and 0.0.0.0 are 127.0.0.1, `::ffff:a.b.c.d`
 * is a.b.c.d, `::` is ::1 (127.1 and case are the URL parser's already). Distinct loopback
 * addresses stay distinct: a server may listen on 127.0.0.2 only, or on ::1 only. With
 * `address`, the key of the URL's host name resolved to that address, so `http://gpu1:8000`
 * and `http://10.0.0.5:8000` meet when gpu1 is 10.0.0.5.
 */
export function workerIdentity(normalizedUrl: string, address?: string): string {
  const url = new URL(normalizedUrl);
  const port = url.port !== "" ? url.port : url.protocol === "https:" ? "443" : "80";
  const host = address ?? url.hostname;
  const key = socketHost(host);
  return `${url.protocol}//${key}:${port}${url.pathname === "/" ? "" : url.pathname}`;
}

/** The address a URL's host name reaches, as one spelling (see workerIdentity). */
function socketHost(host: string): string {
  if (isLoopbackName(host) || host === "0.0.0.0") return "127.0.0.1";
  const mapped = ipv4MappedAddress(host);
  if (mapped !== undefined) return mapped === "0.0.0.0" ? "127.0.0.1" : mapped;
  // The unspecified IPv6 address reaches this host's ::1 (as 0.0.0.0 reaches 127.0.0.1).
  if (host === "[::]") return "[::1]";
  return host;
}

/** Whether the URL's host is an IP literal or a loopback name: nothing to resolve. */
export function hostNeedsLookup(normalizedUrl: string): boolean {
  const host = new URL(normalizedUrl).hostname;
  return !host.startsWith("[") && !isIP(host) && !isLoopbackName(host);
}

/** A short id that stays the same for the same URL across restarts and router replicas. */
export function workerIdFor(normalizedUrl: string): string {
  return createHash("sha256").update(normalizedUrl).digest("hex").slice(0, 10);
}
