import { RouterError } from "../errors.js";

/**
 * One rule for every JSON body the router reads, data plane and admin API alike: no
 * Content-Type is taken as JSON (what many scripts send), JSON types are accepted, and anything
 * else (curl's -d default, application/x-www-form-urlencoded, among others) gets 415 with the fix.
 */
export function checkContentType(contentType: string | undefined): void {
  // What nearly every client sends, accepted without splitting and lowering it (every request).
  if (contentType === undefined || contentType === "application/json") return;
  const type = contentType.split(";")[0]?.trim().toLowerCase() ?? "";
  if (type === "application/json" || type.endsWith("+json")) return;
  throw new RouterError(
    "unsupported_media_type",
    `Content-Type must be application/json, got "${type}" (with curl, add -H 'Content-Type: application/json').`,
  );
}
