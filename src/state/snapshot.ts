import { createHash } from "node:crypto";
import type { IndexPath, PrefixIndex } from "../index/prefix-index.js";
import type { Logger } from "../logger.js";
import { type HoldMembers, SnapshotHold } from "./snapshot-hold.js";
import { nextStamp } from "./state-op.js";
import type { StateSecret } from "./state-secret.js";

/**
 * A snapshot of the prefix index: per worker, the texts of its tree's leaves (what it holds,
 * bounded by its budget), so that a router that starts (--state-file) or a replica that joins
 * (--state-url) routes on what the engines still hold instead of starting cold.
 *
 * Format (version 1), lines separated by "\n":
 *   1. header, JSON: format, v, scope, writer, seq, at (epoch ms), stream (the ops stream ID the
 *      snapshot covers; "" without Redis), workers, paths, bytes (of the body), sha256 (of it);
 *   2. the header's signature (StateSecret.sign under `scope`: the same HMAC as the ops);
 *   3. the body: per worker and model a group line {"w": id, "m": model}, then one line per text,
 *      [rank, shared, suffix]: texts sorted, each front-coded against the one before (`shared`
 *      characters of it, then `suffix`), `rank` its recency among the worker's texts (0 newest).
 *
 * Compact (a text shares its prefix with its neighbour, so the body is about the trees'
 * characters, not the sum of the paths), signed, and bound to the time it was written (`at`,
 * refused past a maximum age: an old snapshot put back is a replay) and to its writer's sequence.
 * Read and applied in slices of a few ms, so that a large one never holds requests up.
 */
export const SNAPSHOT_FORMAT = "radixgate-index-snapshot";
export const SNAPSHOT_VERSION = 1;

export interface SnapshotHeader {
  readonly format: typeof SNAPSHOT_FORMAT;
  readonly v: number;
  readonly scope: string;
  readonly writer: string;
  readonly seq: number;
  readonly at: number;
  readonly stream: string;
  readonly workers: number;
  readonly paths: number;
  readonly bytes: number;
  readonly sha256: string;
}

/** Longest text a snapshot may hold (a routed text; bounds what one line can make). */
export const MAX_SNAPSHOT_TEXT_CHARS = 8 * 1024 * 1024;

/** Longest a slice of work runs before the event loop gets a turn. */
const SLICE_MS = 8;
/** Bytes hashed between two checks of the clock. */
const HASH_CHUNK = 1 << 20;
/** Longest header line read (it is small; a longer first line is not a snapshot). */
const MAX_HEADER_BYTES = 4096;

export interface WriteOptions {
  readonly secret: StateSecret;
  readonly scope: string;
  readonly writer: string;
  /** The ops stream ID everything up to which the index holds ("" without Redis). */
  readonly stream: string;
  /** Largest snapshot: each worker gets an equal share of it, its newest texts first. */
  readonly maxBytes: number;
}

/** The snapshot of `workerIds`' parts of `index` (their newest texts, within maxBytes). */
export async function writeSnapshot(
  index: PrefixIndex,
  workerIds: readonly string[],
  options: WriteOptions,
): Promise<Buffer> {
  // Characters cost up to 2 bytes once escaped or encoded; the rest is the per-line overhead.
  const share = Math.floor(options.maxBytes / Math.max(1, workerIds.length) / 3);
  const parts: Buffer[] = [];
  let bytes = 0;
  let paths = 0;
  let workers = 0;
  let sliceStart = performance.now();
  for (const id of workerIds) {
    const held = index.paths?.(id, Math.min(share, index.size(id)));
    if (held === undefined || held.length === 0) continue;
    const body = Buffer.from(encodeWorker(id, held), "utf8");
    if (bytes + body.length > options.maxBytes) break;
    parts.push(body);
    bytes += body.length;
    paths += held.length;
    workers += 1;
    if (performance.now() - sliceStart > SLICE_MS) {
      await yieldTurn();
      sliceStart = performance.now();
    }
  }
  const body = Buffer.concat(parts, bytes);
  const stamp = nextStamp();
  const header: SnapshotHeader = {
    format: SNAPSHOT_FORMAT,
    v: SNAPSHOT_VERSION,
    scope: options.scope,
    writer: options.writer,
    seq: stamp.seq,
    at: stamp.at,
    stream: options.stream,
    workers,
    paths,
    bytes,
    sha256: await digest(body),
  };
  const line = JSON.stringify(header);
  const signature = options.secret.sign(options.scope, [line]);
  return Buffer.concat([Buffer.from(`${line}\n${signature}\n`, "utf8"), body]);
}

function encodeWorker(id: string, held: readonly IndexPath[]): string {
  const order = held.map((path, rank) => ({ rank, model: path.model ?? "", path }));
  order.sort((a, b) =>
    a.model === b.model ? compare(a.path.text, b.path.text) : compare(a.model, b.model),
  );
  const lines: string[] = [];
  let model: string | undefined | null = null;
  let previous = "";
  for (const { rank, path } of order) {
    if (path.model !== model || lines.length === 0) {
      model = path.model;
      previous = "";
      lines.push(JSON.stringify(model === undefined ? { w: id } : { w: id, m: model }));
    }
    const shared = commonPrefix(previous, path.text);
    lines.push(JSON.stringify([rank, shared, path.text.slice(shared)]));
    previous = path.text;
  }
  return `${lines.join("\n")}\n`;
}

export interface ReadOptions {
  readonly secret: StateSecret;
  readonly scope: string;
  /** Oldest snapshot accepted (ms); an older one is refused as a replay. */
  readonly maxAgeMs: number;
  readonly maxBytes: number;
  readonly now?: number;
}

/** Why a snapshot was refused (logged; the router then starts cold). */
export class SnapshotRefused extends Error {}

/**
 * The header and body of a snapshot, checked: size, format, version, signature (under this
 * fleet's scope), age and the body's digest. Throws SnapshotRefused saying why not.
 */
export async function readSnapshot(
  data: Buffer,
  options: ReadOptions,
): Promise<{ header: SnapshotHeader; body: Buffer }> {
  if (data.length > options.maxBytes + MAX_HEADER_BYTES * 2)
    throw new SnapshotRefused(`it is larger than the limit (${data.length} bytes)`);
  const first = data.indexOf(0x0a);
  const second = first < 0 ? -1 : data.indexOf(0x0a, first + 1);
  if (first < 0 || first > MAX_HEADER_BYTES || second < 0 || second - first > MAX_HEADER_BYTES)
    throw new SnapshotRefused("it is not a radixgate index snapshot (no header)");
  const line = data.subarray(0, first).toString("utf8");
  const signature = data.subarray(first + 1, second).toString("utf8");
  let header: SnapshotHeader;
  try {
    header = JSON.parse(line) as SnapshotHeader;
  } catch {
    throw new SnapshotRefused("it is not a radixgate index snapshot (unreadable header)");
  }
  if (header?.format !== SNAPSHOT_FORMAT)
    throw new SnapshotRefused("it is not a radixgate index snapshot");
  if (header.v !== SNAPSHOT_VERSION)
    throw new SnapshotRefused(`its version ${String(header.v)} is not ${SNAPSHOT_VERSION}`);
  if (!options.secret.verify(options.scope, [line], signature))
    throw new SnapshotRefused(
      "its signature does not match (another fleet's or another secret's snapshot, or altered)",
    );
  const now = options.now ?? Date.now();
  if (!Number.isSafeInteger(header.at) || Math.abs(now - header.at) > options.maxAgeMs)
    throw new SnapshotRefused(
      `it was written ${Math.round((now - header.at) / 1000)} s ago, past the maximum age`,
    );
  const body = data.subarray(second + 1);
  if (body.length > options.maxBytes)
    throw new SnapshotRefused(`it is larger than the limit (${body.length} bytes)`);
  if (body.length !== header.bytes || (await digest(body)) !== header.sha256)
    throw new SnapshotRefused("it is corrupt (its body does not match its digest)");
  return { header, body };
}

/** Where a snapshot's texts go: the workers known here, and the index below any publishing. */
export interface SnapshotSink {
  known(workerId: string): boolean;
  insert(workerId: string, model: string | undefined, text: string): void;
  /** A text of a worker not known here (absent: it is left out). */
  hold?(workerId: string, model: string | undefined, text: string): void;
}

export interface Applied {
  readonly workers: number;
  readonly paths: number;
  /** Workers of the snapshot unknown here (held for when they register, or left out). */
  readonly skipped: number;
  /** Texts held for workers unknown here. */
  readonly held: number;
  /** Longest slice of work between two turns of the event loop (ms). */
  readonly longestSliceMs: number;
}

/**
 * Inserts a checked body's texts into `sink`, each worker's oldest first (so its eviction order
 * is the snapshot's), in slices of a few ms. Throws SnapshotRefused on a malformed line.
 */
export async function applySnapshot(
  body: Buffer,
  sink: SnapshotSink,
  maxTextChars: number,
): Promise<Applied> {
  let workers = 0;
  let paths = 0;
  let skipped = 0;
  let held = 0;
  let longest = 0;
  let sliceStart = performance.now();
  const tick = async () => {
    const spent = performance.now() - sliceStart;
    if (spent < SLICE_MS) return;
    longest = Math.max(longest, spent);
    await yieldTurn();
    sliceStart = performance.now();
  };
  let worker: string | undefined;
  let model: string | undefined;
  let previous = "";
  let pending: { rank: number; model: string | undefined; text: string }[] = [];
  const flush = async () => {
    if (worker === undefined || pending.length === 0) return;
    const id = worker;
    pending.sort((a, b) => b.rank - a.rank);
    for (const p of pending) {
      if (sink.known(id)) {
        sink.insert(id, p.model, p.text);
        paths += 1;
      } else if (sink.hold !== undefined) {
        sink.hold(id, p.model, p.text);
        held += 1;
      } else break;
      await tick();
    }
    pending = [];
  };
  let at = 0;
  let lineNo = 0;
  while (at < body.length) {
    let end = body.indexOf(0x0a, at);
    if (end < 0) end = body.length;
    const line = body.subarray(at, end).toString("utf8");
    at = end + 1;
    lineNo += 1;
    if (line === "") continue;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      throw new SnapshotRefused(`line ${lineNo} of its body is unreadable`);
    }
    if (Array.isArray(value)) {
      const [rank, shared, suffix] = value as unknown[];
      if (
        worker === undefined ||
        !Number.isSafeInteger(rank) ||
        !Number.isSafeInteger(shared) ||
        (shared as number) < 0 ||
        (shared as number) > previous.length ||
        typeof suffix !== "string"
      )
        throw new SnapshotRefused(`line ${lineNo} of its body is malformed`);
      const text = previous.slice(0, shared as number) + suffix;
      previous = text;
      if (text.length > maxTextChars)
        throw new SnapshotRefused(`line ${lineNo} holds a text over the limit`);
      if (sink.known(worker) || sink.hold !== undefined)
        pending.push({ rank: rank as number, model, text });
    } else {
      const group = value as { w?: unknown; m?: unknown };
      if (typeof group?.w !== "string" || (group.m !== undefined && typeof group.m !== "string"))
        throw new SnapshotRefused(`line ${lineNo} of its body is malformed`);
      if (group.w !== worker) {
        await flush();
        worker = group.w;
        if (sink.known(worker)) workers += 1;
        else skipped += 1;
      }
      model = group.m as string | undefined;
      previous = "";
    }
    await tick();
  }
  await flush();
  return { workers, paths, skipped, held, longestSliceMs: Math.round(longest * 10) / 10 };
}

/**
 * A snapshot read, checked and inserted into `index` for the workers registered in `members` (the
 * one load path of the state file and of Redis); the texts of workers that register later are
 * held until they do (state/snapshot-hold.ts), no longer than the snapshot's maximum age. Throws
 * SnapshotRefused saying why not.
 */
export async function loadSnapshot(
  data: Buffer,
  options: ReadOptions,
  index: Pick<PrefixIndex, "insert">,
  members: HoldMembers,
  logger: Logger,
): Promise<{ header: SnapshotHeader; applied: Applied }> {
  const { header, body } = await readSnapshot(data, options);
  const hold = new SnapshotHold(members, index, options.maxBytes, logger);
  const applied = await applySnapshot(body, hold.sink(), MAX_SNAPSHOT_TEXT_CHARS);
  if (applied.held > 0) hold.expireAt(header.at + options.maxAgeMs, options.now);
  return { header, applied };
}

/** sha256 of `data` in chunks, the event loop getting turns between them. */
async function digest(data: Buffer): Promise<string> {
  const hash = createHash("sha256");
  let sliceStart = performance.now();
  for (let at = 0; at < data.length; at += HASH_CHUNK) {
    hash.update(data.subarray(at, at + HASH_CHUNK));
    if (performance.now() - sliceStart > SLICE_MS) {
      await yieldTurn();
      sliceStart = performance.now();
    }
  }
  return hash.digest("hex");
}

function commonPrefix(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a.charCodeAt(i) === b.charCodeAt(i)) i++;
  return i;
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function yieldTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
