import { createHash, timingSafeEqual } from "node:crypto";

function sha256(text: string): Buffer {
  return createHash("sha256").update(text).digest();
}

/**
 * A configured bearer key (--api-key, --admin-api-key), held as its digest only: hashed once,
 * where the routes' settings are assembled, never on a request, and never kept in clear where
 * the routes (or a dump of their settings) could show it.
 */
export class BearerKey {
  readonly #digest: Buffer;

  constructor(key: string) {
    this.#digest = sha256(key);
  }

  /**
   * Constant-time check of `Authorization: Bearer <key>` (hashing first makes lengths equal): one
   * hash per check, of the key the client presents.
   */
  matches(header: string | undefined): boolean {
    if (header === undefined) return false;
    const match = /^Bearer\s+(.+)$/i.exec(header.trim());
    if (!match) return false;
    return timingSafeEqual(sha256(match[1] as string), this.#digest);
  }
}

/** The key's digest when a key is set; undefined (the route stays open) when not. */
export function bearerKey(key: string | undefined): BearerKey | undefined {
  return key === undefined ? undefined : new BearerKey(key);
}

/**
 * Whether a client may use the admin API: it sends the admin key when one is set
 * (--admin-api-key), else it is on loopback.
 */
export function adminAllowed(
  adminApiKey: BearerKey | undefined,
  authorization: string | undefined,
  remoteAddress: string | undefined,
): boolean {
  return adminApiKey !== undefined ? adminApiKey.matches(authorization) : isLoopback(remoteAddress);
}

/** 127.0.0.0/8, ::1 and their IPv4-mapped forms. */
export function isLoopback(address: string | undefined): boolean {
  if (!address) return false;
  const v4 = address.startsWith("::ffff:") ? address.slice(7) : address;
  return v4.startsWith("127.") || address === "::1";
}
