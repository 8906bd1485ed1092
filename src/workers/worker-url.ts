import { createHash } from "node:crypto";
import { BlockList, isIPv4, isIPv6 } from "node:net";

/**
 * Canonical form of a worker base URL: http(s) only, no credentials, query or fragment, no
 * trailing slash, no trailing `/v1`. Spellings of one worker compare equal: host case and a
 * trailing dot, default ports (`http://a:80` = `http://a`), IPv4 written as a number or in hex
 * (`http://2130706433` = `http://127.0.0.1`, done by the WHATWG URL parser) and IPv4-mapped IPv6
 * (`http://[::ffff:127.0.0.1]` and `http://[::ffff:7f00:1]` = `http://127.0.0.1`).
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

/** The hostname as it appears in a canonical URL (IPv6 in brackets). */
function canonicalHost(hostname: string): string {
  const name = hostname.replace(/\.$/, "");
  if (!name.startsWith("[")) return name;
  const mapped = ipv4Mapped(name.slice(1, -1));
  return mapped ?? name;
}

/** `::ffff:7f00:1` → `127.0.0.1` (the URL parser has already compressed the address). */
function ipv4Mapped(ipv6: string): string | undefined {
  const match = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(ipv6);
  if (!match) return undefined;
  const hi = Number.parseInt(match[1] ?? "", 16);
  const lo = Number.parseInt(match[2] ?? "", 16);
  return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
}

/** Link-local ranges (where cloud metadata services live) and the metadata addresses outside them. */
const LINK_LOCAL = new BlockList();
LINK_LOCAL.addSubnet("169.254.0.0", 16, "ipv4");
LINK_LOCAL.addSubnet("fe80::", 10, "ipv6");
// AWS IMDS over IPv6, Alibaba Cloud metadata.
LINK_LOCAL.addAddress("fd00:ec2::254", "ipv6");
LINK_LOCAL.addAddress("100.100.100.200", "ipv4");
const METADATA_HOSTS = new Set(["metadata.google.internal", "metadata.goog", "metadata"]);

/**
 * Why a canonical worker URL points at a link-local or cloud-metadata address, or undefined.
 * Such a "worker" is almost always a mistake or an attempt to reach credentials (SSRF), so the
 * registry refuses it unless --allow-link-local-workers is set.
 */
export function linkLocalReason(normalizedUrl: string): string | undefined {
  const hostname = new URL(normalizedUrl).hostname;
  if (METADATA_HOSTS.has(hostname)) return `${hostname} is a cloud metadata host`;
  const ip = hostname.startsWith("[") ? hostname.slice(1, -1) : hostname;
  if (isLinkLocalIp(ip)) return `${ip} is a link-local or cloud metadata address`;
  return undefined;
}

/** Whether an IP address (v4, v6 or IPv4-mapped v6) is link-local or a cloud metadata address. */
export function isLinkLocalIp(address: string): boolean {
  const ip = address.replace(/%.*$/, "").toLowerCase();
  if (isIPv4(ip)) return LINK_LOCAL.check(ip, "ipv4");
  if (!isIPv6(ip)) return false;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(ip)?.[1] ?? ipv4Mapped(ip);
  return mapped !== undefined ? LINK_LOCAL.check(mapped, "ipv4") : LINK_LOCAL.check(ip, "ipv6");
}

/** A short id that stays the same for the same URL across restarts and router replicas. */
export function workerIdFor(normalizedUrl: string): string {
  return createHash("sha256").update(normalizedUrl).digest("hex").slice(0, 10);
}
