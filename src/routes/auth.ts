import { createHash, timingSafeEqual } from "node:crypto";

/**
 * The configured keys' digests (--api-key, --admin-api-key), each made once rather than on every
 * request: a key here comes from the configuration, never from a client, so a few entries suffice.
 */
const keyDigests = new Map<string, Buffer>();

function sha256(text: string): Buffer {
  return createHash("sha256").update(text).digest();
}

function keyDigest(key: string): Buffer {
  let digest = keyDigests.get(key);
  if (digest === undefined) {
    if (keyDigests.size >= 8) keyDigests.clear();
    digest = sha256(key);
    keyDigests.set(key, digest);
  }
  return digest;
}

/**
 * Constant-time check of `Authorization: Bearer <key>` (hashing first makes lengths equal): one
 * hash per check, of the key the client presents.
 */
export function bearerMatches(header: string | undefined, key: string): boolean {
  if (header === undefined) return false;
  const match = /^Bearer\s+(.+)$/i.exec(header.trim());
  if (!match) return false;
  return timingSafeEqual(sha256(match[1] as string), keyDigest(key));
}

/**
 * Whether a client may use the admin API: it sends the admin key when one is set
 * (--admin-api-key), else it is on loopback.
 */
export function adminAllowed(
  adminApiKey: string | undefined,
  authorization: string | undefined,
  remoteAddress: string | undefined,
): boolean {
  return adminApiKey !== undefined
    ? bearerMatches(authorization, adminApiKey)
    : isLoopback(remoteAddress);
}

/** 127.0.0.0/8, ::1 and their IPv4-mapped forms. */
export function isLoopback(address: string | undefined): boolean {
  if (!address) return false;
  const v4 = address.startsWith("::ffff:") ? address.slice(7) : address;
  return v4.startsWith("127.") || address === "::1";
}
