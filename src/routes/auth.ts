import { createHash, timingSafeEqual } from "node:crypto";

/** Constant-time check of `Authorization: Bearer <key>` (hashing first makes lengths equal). */
export function bearerMatches(header: string | undefined, key: string): boolean {
  if (header === undefined) return false;
  const match = /^Bearer\s+(.+)$/i.exec(header.trim());
  if (!match) return false;
  const given = createHash("sha256")
    .update(match[1] as string)
    .digest();
  const expected = createHash("sha256").update(key).digest();
  return timingSafeEqual(given, expected);
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
