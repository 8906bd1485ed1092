import { readPendingPairs } from "./peer-pending.js";
import type { StateOp } from "./state-op.js";

/**
 * The messages of radixgate-cluster's local channel (node:cluster IPC) between the processes of
 * one host and the primary (state/cluster-hub.ts), which relays them. Every message is an object
 * tagged `rg: "sib"`, so that it never mixes with node:cluster's own messages or the stop request.
 *
 * process → hub: hello (a process starting; the hub replays what it kept), ops (its decisions,
 * with its counts when they changed), load (its in-flight counts per worker, whole, when they
 * changed without a decision), claim (a new prefix, SET NX semantics), member (a worker added or
 * removed through its admin API).
 * hub → process: ops / load / member (a sibling's, with its id), claimed (the answer to a claim),
 * ready (the replay is over), gone (a sibling exited: forget its counts), missed (how many
 * messages the primary dropped for this process while it did not read its channel).
 */

/**
 * A change of one process's worker set, for its siblings: an add carries the worker's fields as
 * POST /workers names them (url, api_key, worker_type, bootstrap_port), parsed again by the
 * receiver (state/cluster-transport.ts); a remove, the worker's canonical URL.
 */
export type SiblingMemberChange =
  | { readonly kind: "add"; readonly url: string; readonly fields: Record<string, MemberField> }
  | { readonly kind: "remove"; readonly url: string };
export type MemberField = string | number | null;
/** A process's queued prefill per worker id: [characters, requests] (state/peer-pending.ts). */
export type SiblingPending = Record<string, readonly [number, number]>;
export type SiblingMessage =
  | { readonly rg: "sib"; readonly t: "hello" }
  | {
      readonly rg: "sib";
      readonly t: "ops";
      readonly from?: number;
      readonly ops: StateOp[];
      /** The sender's in-flight counts, when they changed since its last message (one message). */
      readonly counts?: Record<string, number>;
      /** Its queued prefill, sent with the counts (covers every decision it sent before). */
      readonly pending?: SiblingPending;
    }
  | {
      readonly rg: "sib";
      readonly t: "load";
      readonly from?: number;
      readonly counts: Record<string, number>;
      readonly pending?: SiblingPending;
    }
  | {
      readonly rg: "sib";
      readonly t: "claim";
      readonly n: number;
      readonly key: string;
      readonly value: string;
      readonly ttlMs: number;
    }
  | { readonly rg: "sib"; readonly t: "claimed"; readonly n: number; readonly value: string }
  | {
      readonly rg: "sib";
      readonly t: "member";
      readonly from?: number;
      readonly change: SiblingMemberChange;
    }
  | { readonly rg: "sib"; readonly t: "ready" }
  /** Messages the primary dropped for this process while it did not read its channel. */
  | { readonly rg: "sib"; readonly t: "missed"; readonly n: number }
  | { readonly rg: "sib"; readonly t: "gone"; readonly from: number };

/** Ops per message: a burst leaves in a few messages, none of them large. */
export const MAX_OPS_PER_MESSAGE = 256;
/** Longest routed text a process shares with its siblings (its first characters). */
export const SIBLING_MAX_TEXT_CHARS = 65_536;
/** Longest worker id, model name or claim value (ids are short hashes; values name a worker). */
const MAX_FIELD_CHARS = 4096;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null;
const shortString = (v: unknown): v is string =>
  typeof v === "string" && v.length <= MAX_FIELD_CHARS;
const count = (v: unknown): v is number => typeof v === "number" && Number.isInteger(v) && v >= 0;

/** An index op as received, or undefined when it is not one (membership ops do not travel here). */
function readOp(v: unknown): StateOp | undefined {
  if (!isObject(v) || !shortString(v.worker) || typeof v.text !== "string") return undefined;
  if (v.text.length > SIBLING_MAX_TEXT_CHARS) return undefined;
  if (v.model !== undefined && !shortString(v.model)) return undefined;
  const model = v.model === undefined ? {} : { model: v.model };
  if (v.kind === "insert") {
    const uncached = count(v.uncached) && v.uncached > 0 ? { uncached: v.uncached } : {};
    return { kind: "insert", worker: v.worker, text: v.text, ...model, ...uncached };
  }
  if (v.kind === "truncate" && count(v.keep))
    return { kind: "truncate", worker: v.worker, text: v.text, keep: v.keep, ...model };
  return undefined;
}

/** In-flight counts as received: positive integers by worker id; undefined when not an object. */
function readCounts(raw: unknown): Record<string, number> | undefined {
  if (!isObject(raw)) return undefined;
  const counts: Record<string, number> = {};
  let n = 0;
  for (const [id, c] of Object.entries(raw)) {
    if (++n > 65_536) break;
    if (id.length <= MAX_FIELD_CHARS && count(c) && c > 0) counts[id] = c;
  }
  return counts;
}

/** Queued prefill as received: positive integer pairs by worker id; undefined when absent or bad. */
function readPending(raw: unknown): SiblingPending | undefined {
  if (!isObject(raw)) return undefined;
  const pending: Record<string, readonly [number, number]> = {};
  readPendingPairs(raw, (id, chars, requests) => {
    pending[id] = [chars, requests];
  });
  return pending;
}

/** Fields of a worker at most (POST /workers has six). */
const MAX_MEMBER_FIELDS = 16;

/** A membership change as received, or undefined when it is not one. */
function readMemberChange(v: unknown): SiblingMemberChange | undefined {
  if (!isObject(v) || !shortString(v.url)) return undefined;
  if (v.kind === "remove") return { kind: "remove", url: v.url };
  if (v.kind !== "add" || !isObject(v.fields)) return undefined;
  const entries = Object.entries(v.fields);
  if (entries.length > MAX_MEMBER_FIELDS) return undefined;
  const fields: Record<string, MemberField> = {};
  for (const [name, value] of entries) {
    const ok =
      value === null || shortString(value) || (typeof value === "number" && Number.isFinite(value));
    if (!ok || name.length > 64) return undefined;
    fields[name] = value as MemberField;
  }
  return { kind: "add", url: v.url, fields };
}

/**
 * A message from the channel, checked (its peer is a process of the same program, but a bad
 * message must never crash the reader): undefined for anything that is not one of ours or not
 * well formed. Bad ops inside a batch are dropped, the others kept.
 */
export function readSiblingMessage(raw: unknown): SiblingMessage | undefined {
  if (!isObject(raw) || raw.rg !== "sib") return undefined;
  const from = count(raw.from) ? { from: raw.from } : {};
  switch (raw.t) {
    case "hello":
    case "ready":
      return { rg: "sib", t: raw.t };
    case "gone":
      return count(raw.from) ? { rg: "sib", t: "gone", from: raw.from } : undefined;
    case "ops": {
      if (!Array.isArray(raw.ops) || raw.ops.length > MAX_OPS_PER_MESSAGE) return undefined;
      const ops: StateOp[] = [];
      for (const op of raw.ops) {
        const read = readOp(op);
        if (read !== undefined) ops.push(read);
      }
      const counts = raw.counts === undefined ? undefined : readCounts(raw.counts);
      const pending = counts === undefined ? undefined : readPending(raw.pending);
      return {
        rg: "sib",
        t: "ops",
        ops,
        ...from,
        ...(counts !== undefined ? { counts } : {}),
        ...(pending !== undefined ? { pending } : {}),
      };
    }
    case "load": {
      const counts = readCounts(raw.counts);
      const pending = readPending(raw.pending);
      return counts === undefined
        ? undefined
        : { rg: "sib", t: "load", counts, ...from, ...(pending !== undefined ? { pending } : {}) };
    }
    case "claim":
      if (!count(raw.n) || !shortString(raw.key) || !shortString(raw.value)) return undefined;
      if (!count(raw.ttlMs)) return undefined;
      return { rg: "sib", t: "claim", n: raw.n, key: raw.key, value: raw.value, ttlMs: raw.ttlMs };
    case "member": {
      const change = readMemberChange(raw.change);
      return change === undefined ? undefined : { rg: "sib", t: "member", change, ...from };
    }
    case "missed":
      return count(raw.n) ? { rg: "sib", t: "missed", n: raw.n } : undefined;
    case "claimed":
      if (!count(raw.n) || !shortString(raw.value)) return undefined;
      return { rg: "sib", t: "claimed", n: raw.n, value: raw.value };
    default:
      return undefined;
  }
}
