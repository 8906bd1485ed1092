import { roleFrom, type WorkerRole } from "../workers/worker-role.js";
import type { StateSecret } from "./state-secret.js";

/**
 * One operation shared between replicas through the ops stream. Index operations name the worker
 * by id (a hash of its canonical URL, the same on every replica); membership operations carry the
 * URL itself, so that a replica that never saw the worker can add it.
 */
export type StateOp =
  | {
      readonly kind: "insert";
      readonly worker: string;
      readonly model?: string;
      readonly text: string;
      /**
       * Characters of the text the deciding replica expected the worker to prefill (not held
       * there): the work the decision queued, which peers count until its replica's next load
       * report (state/peer-pending.ts). Absent or 0: none.
       */
      readonly uncached?: number;
    }
  | {
      readonly kind: "truncate";
      readonly worker: string;
      readonly model?: string;
      readonly text: string;
      readonly keep: number;
    }
  | {
      readonly kind: "add";
      readonly url: string;
      /** The worker's own API key (sealed on the wire, see StateSecret); absent = none of its own. */
      readonly apiKey?: string;
      /** Prefill or decode (disaggregation), with its bootstrap port; absent = a regular worker. */
      readonly role?: WorkerRole;
    }
  | { readonly kind: "remove"; readonly url: string };

/** Field codes of a stream entry (short: they are repeated in every entry). */
const KIND_CODE = { insert: "i", truncate: "t", add: "a", remove: "d" } as const;
const CODE_KIND = { i: "insert", t: "truncate", a: "add", d: "remove" } as const;

/** How a stream entry is signed and checked: the shared secret and the stream's key (the scope). */
export interface OpCodec {
  readonly secret: StateSecret;
  /** The ops stream's key: a signature is valid under this key only. */
  readonly scope: string;
}

/**
 * Why a stream entry was dropped (the `reason` label of radixgate_state_ops_rejected_total):
 * stale and replayed are signed entries written again (state/op-order.ts).
 */
export type RejectReason =
  | "unsigned"
  | "bad_signature"
  | "oversize"
  | "unreadable"
  | "stale"
  | "replayed";

/**
 * Where an op stands among its writer's: `seq` grows with every op a process signs, `at` is when
 * it was signed (epoch ms). Both are signed with the op, so a captured op written again keeps them
 * and is refused as out of order or too old (state/op-order.ts).
 */
export interface OpStamp {
  readonly seq: number;
  readonly at: number;
}

let lastSeq = 0;

/** The next stamp of this process: a sequence number above every earlier one, and the time. */
export function nextStamp(): OpStamp {
  lastSeq += 1;
  return { seq: lastSeq, at: Date.now() };
}

/**
 * The sequence number of this process's last stamped op (0 before any): a load report that
 * carries it covers every op sent before it (state/peer-pending.ts).
 */
export function lastSeqSent(): number {
  return lastSeq;
}

/** Fields (names and values) an entry may have; ours have at most 16. */
export const MAX_FIELDS = 32;
/** Longest value of any field but the text (URLs, ids, model names, a sealed key). */
export const MAX_FIELD_CHARS = 4096;

/**
 * The XADD field list of an op: r <replica> q <seq> t <signed at> k <kind>, the op's own fields,
 * then s <signature>. Signed when it is sent, so `t` is close to the entry's stream ID.
 */
export function encodeOp(
  replica: string,
  op: StateOp,
  codec: OpCodec,
  stamp: OpStamp = nextStamp(),
): string[] {
  const fields = [
    "r",
    replica,
    "q",
    String(stamp.seq),
    "t",
    String(stamp.at),
    "k",
    KIND_CODE[op.kind],
  ];
  switch (op.kind) {
    case "insert":
    case "truncate":
      fields.push("w", op.worker, "x", op.text);
      if (op.model !== undefined) fields.push("m", op.model);
      if (op.kind === "truncate") fields.push("n", String(op.keep));
      else if (op.uncached !== undefined && op.uncached > 0) fields.push("p", String(op.uncached));
      break;
    case "add":
      fields.push("u", op.url);
      if (op.apiKey !== undefined) fields.push("a", codec.secret.seal(op.apiKey, op.url));
      fields.push(...roleFields(op.role));
      break;
    case "remove":
      fields.push("u", op.url);
      break;
  }
  fields.push("s", codec.secret.sign(codec.scope, fields));
  return fields;
}

/**
 * A stream entry's fields back to (replica, op), or why it is dropped. The cheap checks come
 * first: an entry over the size bounds is dropped before its signature is computed, so a huge
 * entry costs its transfer and nothing more; then the signature; only a signed entry is parsed.
 */
export function decodeOp(
  fields: readonly string[],
  codec: OpCodec,
  maxTextChars: number,
): { replica: string; op: StateOp } | { rejected: RejectReason } {
  if (fields.length > MAX_FIELDS || fields.length % 2 !== 0) return { rejected: "unreadable" };
  let signatureAt = -1;
  for (let i = 0; i < fields.length; i += 2) {
    const value = fields[i + 1] as string;
    const limit = fields[i] === "x" ? maxTextChars : MAX_FIELD_CHARS;
    if (value.length > limit) return { rejected: "oversize" };
    if (fields[i] === "s" && signatureAt < 0) signatureAt = i;
  }
  if (signatureAt < 0) return { rejected: "unsigned" };
  const signed = [...fields.slice(0, signatureAt), ...fields.slice(signatureAt + 2)];
  if (!codec.secret.verify(codec.scope, signed, fields[signatureAt + 1] as string))
    return { rejected: "bad_signature" };
  const decoded = parseFields(signed, codec);
  return decoded ?? { rejected: "unreadable" };
}

/** The stamp of a decoded (signed) entry's fields; undefined when it has none or a bad one. */
export function opStamp(fields: readonly string[]): OpStamp | undefined {
  let seq: number | undefined;
  let at: number | undefined;
  for (let i = 0; i + 1 < fields.length; i += 2) {
    if (fields[i] === "q" && seq === undefined) seq = Number(fields[i + 1]);
    else if (fields[i] === "t" && at === undefined) at = Number(fields[i + 1]);
  }
  if (!Number.isSafeInteger(seq) || !Number.isSafeInteger(at)) return undefined;
  if ((seq as number) < 1 || (at as number) < 0) return undefined;
  return { seq: seq as number, at: at as number };
}

function parseFields(
  fields: readonly string[],
  codec: OpCodec,
): { replica: string; op: StateOp } | undefined {
  const get = (name: string): string | undefined => {
    for (let i = 0; i + 1 < fields.length; i += 2) if (fields[i] === name) return fields[i + 1];
    return undefined;
  };
  const replica = get("r");
  const code = get("k");
  if (replica === undefined || code === undefined || !(code in CODE_KIND)) return undefined;
  const kind = CODE_KIND[code as keyof typeof CODE_KIND];
  if (kind === "add" || kind === "remove") {
    const url = get("u");
    if (url === undefined) return undefined;
    if (kind === "remove") return { replica, op: { kind, url } };
    const role = roleOf(get("y"), get("b"));
    if (role === null) return undefined;
    const withRole = role === undefined ? {} : { role };
    const sealed = get("a");
    if (sealed === undefined) return { replica, op: { kind, url, ...withRole } };
    const apiKey = codec.secret.open(sealed, url);
    return apiKey === undefined
      ? undefined
      : { replica, op: { kind: "add", url, apiKey, ...withRole } };
  }
  const worker = get("w");
  const text = get("x");
  if (worker === undefined || text === undefined) return undefined;
  const model = get("m");
  const base = model === undefined ? { worker, text } : { worker, text, model };
  if (kind === "insert") {
    const raw = get("p");
    if (raw === undefined) return { replica, op: { kind, ...base } };
    const uncached = Number(raw);
    if (!Number.isSafeInteger(uncached) || uncached < 0) return undefined;
    return { replica, op: { kind, ...base, uncached } };
  }
  const keep = Number(get("n"));
  if (!Number.isInteger(keep) || keep < 0) return undefined;
  return { replica, op: { kind, ...base, keep } };
}

/** A prefill/decode worker's role as fields: y <type> [b <bootstrap port>]; none for a regular one. */
export function roleFields(role: WorkerRole | undefined): string[] {
  if (role === undefined || role.type === "regular") return [];
  return role.bootstrapPort === null
    ? ["y", role.type]
    : ["y", role.type, "b", String(role.bootstrapPort)];
}

/** The role those fields give: undefined for none (regular), null when they are not valid. */
export function roleOf(
  type: string | undefined,
  port: string | undefined,
): WorkerRole | undefined | null {
  if (type === undefined && port === undefined) return undefined;
  const role = roleFrom(type, port);
  return typeof role === "string" ? null : role;
}

/** The first `max` characters of `text`, never ending inside a surrogate pair. */
export function boundedText(text: string, max: number): string {
  if (text.length <= max) return text;
  const code = text.charCodeAt(max - 1);
  const end = code >= 0xd800 && code <= 0xdbff ? max - 1 : max;
  return text.slice(0, end);
}
