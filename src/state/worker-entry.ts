import type { RejectReason } from "./state-op.js";
import type { StateSecret } from "./state-secret.js";

/**
 * A worker's value in the shared workers hash (URL → this), the set a starting replica loads:
 * when it was added, its own API key sealed (if it has one) and a signature over the URL and both,
 * under the hash's key, so that a value written by anyone without the secret, or copied to another
 * URL, is refused like an unsigned op.
 */
interface WorkerEntryJson {
  added_at: number;
  /** Sealed API key (StateSecret.seal, bound to the URL). */
  a?: string;
  /** Signature. */
  s: string;
}

export function encodeWorkerEntry(
  url: string,
  apiKey: string | undefined,
  secret: StateSecret,
  scope: string,
  now = Date.now(),
): string {
  const sealed = apiKey === undefined ? undefined : secret.seal(apiKey, url);
  const entry: WorkerEntryJson = {
    added_at: now,
    ...(sealed !== undefined ? { a: sealed } : {}),
    s: secret.sign(scope, signedFields(url, now, sealed)),
  };
  return JSON.stringify(entry);
}

/** The worker's own API key (or none), or why the value is refused. */
export function decodeWorkerEntry(
  url: string,
  raw: string,
  secret: StateSecret,
  scope: string,
): { apiKey: string | undefined } | { rejected: RejectReason } {
  if (raw.length > 8192 || url.length > 4096) return { rejected: "oversize" };
  let entry: Partial<WorkerEntryJson>;
  try {
    entry = JSON.parse(raw) as Partial<WorkerEntryJson>;
  } catch {
    return { rejected: "unreadable" };
  }
  if (entry === null || typeof entry !== "object") return { rejected: "unreadable" };
  if (typeof entry.s !== "string") return { rejected: "unsigned" };
  const sealed = typeof entry.a === "string" ? entry.a : undefined;
  const addedAt = typeof entry.added_at === "number" ? entry.added_at : Number.NaN;
  if (!secret.verify(scope, signedFields(url, addedAt, sealed), entry.s))
    return { rejected: "bad_signature" };
  if (sealed === undefined) return { apiKey: undefined };
  const apiKey = secret.open(sealed, url);
  return apiKey === undefined ? { rejected: "unreadable" } : { apiKey };
}

function signedFields(url: string, addedAt: number, sealed: string | undefined): string[] {
  return sealed === undefined ? [url, String(addedAt)] : [url, String(addedAt), sealed];
}
