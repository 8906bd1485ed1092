import type { WorkerRole } from "../workers/worker-role.js";
import { type RejectReason, roleFields, roleOf } from "./state-op.js";
import type { StateSecret } from "./state-secret.js";

/**
 * A worker's value in the shared workers hash (URL → this), the set a starting replica loads:
 * when it was signed, its own API key sealed (if it has one) and a signature over the URL and both,
 * under the hash's key, so that a value written by anyone without the secret, or copied to another
 * URL, is refused like an unsigned op. Replicas that keep the worker sign it again now and then,
 * so a value older than --state-max-op-age-ms (one put back after the worker left) is refused.
 */
interface WorkerEntryJson {
  /** When it was signed (epoch ms; named for when the worker was added, as it first was). */
  added_at: number;
  /** Sealed API key (StateSecret.seal, bound to the URL). */
  a?: string;
  /** Prefill or decode, and the bootstrap port (absent: a regular worker). */
  y?: string;
  b?: string;
  /** Signature. */
  s: string;
}

export function encodeWorkerEntry(
  url: string,
  apiKey: string | undefined,
  secret: StateSecret,
  scope: string,
  now = Date.now(),
  role?: WorkerRole,
): string {
  const sealed = apiKey === undefined ? undefined : secret.seal(apiKey, url);
  const [, y, , b] = roleFields(role);
  const entry: WorkerEntryJson = {
    added_at: now,
    ...(sealed !== undefined ? { a: sealed } : {}),
    ...(y !== undefined ? { y } : {}),
    ...(b !== undefined ? { b } : {}),
    s: secret.sign(scope, signedFields(url, now, sealed, y, b)),
  };
  return JSON.stringify(entry);
}

/** The worker's own API key (or none), or why the value is refused. */
export function decodeWorkerEntry(
  url: string,
  raw: string,
  secret: StateSecret,
  scope: string,
): { apiKey: string | undefined; role?: WorkerRole; at: number } | { rejected: RejectReason } {
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
  const y = typeof entry.y === "string" ? entry.y : undefined;
  const b = typeof entry.b === "string" ? entry.b : undefined;
  const addedAt = typeof entry.added_at === "number" ? entry.added_at : Number.NaN;
  if (!secret.verify(scope, signedFields(url, addedAt, sealed, y, b), entry.s))
    return { rejected: "bad_signature" };
  const role = roleOf(y, b);
  if (role === null) return { rejected: "unreadable" };
  const withRole = role === undefined ? { at: addedAt } : { role, at: addedAt };
  if (sealed === undefined) return { apiKey: undefined, ...withRole };
  const apiKey = secret.open(sealed, url);
  return apiKey === undefined ? { rejected: "unreadable" } : { apiKey, ...withRole };
}

/** What the signature covers; a regular worker's entry signs what it signed before roles existed. */
function signedFields(
  url: string,
  addedAt: number,
  sealed: string | undefined,
  type: string | undefined,
  port: string | undefined,
): string[] {
  const fields = sealed === undefined ? [url, String(addedAt)] : [url, String(addedAt), sealed];
  if (type !== undefined) fields.push(`y:${type}`);
  if (port !== undefined) fields.push(`b:${port}`);
  return fields;
}
