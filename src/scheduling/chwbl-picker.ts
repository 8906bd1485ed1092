import { fmix32 } from "../hash/fmix32.js";
import type { Pick, Picker, SchedulingContext } from "./plugin.js";

export interface ChwblOptions {
  /** prefixCharLength: characters of the first user message (or prompt) hashed (KubeAI 100). */
  readonly prefixChars: number;
  /** replication: virtual nodes per endpoint on the ring (KubeAI 256). */
  readonly replication: number;
  /** meanLoadFactor as a ratio (KubeAI 125% = 1.25). */
  readonly loadFactor: number;
}

/**
 * KubeAI's consistent hashing with bounded loads (substratusai/kubeai
 * internal/loadbalancer/balance_chwbl.go, chwblGetAddr and chwblLoadOK; docs/concepts/
 * load-balancing.md):
 * - the key is the first `prefixChars` characters of the first user message (chat) or of the
 *   prompt, plus the adapter;
 * - each endpoint has `replication` points on a hash ring;
 * - from the key's point, walk clockwise to the first endpoint that serves the adapter and whose
 *   in-flight count, counting this request, is within the bound:
 *   inFlight + 1 ≤ loadFactor × (total in-flight + 1) / n (always within when nothing is in
 *   flight); when none is, the first endpoint met that serves the adapter.
 * Never reads the prefix index. In the routing text a chat message starts with `<role>` and ends
 * with a newline (intake/routing-text.ts), so the first user message is found there; a prompt
 * without a `<user>` marker is hashed from its start.
 */
export class ChwblPicker implements Picker {
  readonly type = "chwbl-picker";
  readonly usesPrefixes = false;
  /** Ring of the last candidate list: sorted points and, per point, the candidate's index. */
  private ringIds: string[] = [];
  private points: Uint32Array = new Uint32Array(0);
  private owners: Uint32Array = new Uint32Array(0);
  private visited = new Uint8Array(0);
  /** Rings of recent candidate lists, least recently used first (ids only: no worker is kept). */
  private readonly rings: Ring[] = [];

  constructor(
    readonly name: string,
    private readonly options: ChwblOptions,
  ) {}

  pick(ctx: SchedulingContext, _totals: Float64Array): Pick | -1 {
    const { candidates, alive } = ctx;
    const n = candidates.length;
    let count = 0;
    let total = 0;
    for (let i = 0; i < n; i++) {
      if (alive[i] === 0) continue;
      count++;
      total += candidates[i]!.inFlight;
    }
    if (count === 0) return -1;
    this.ensureRing(ctx);
    const adapter = ctx.request.adapter;
    const bound = (this.options.loadFactor * (total + 1)) / count;
    const points = this.points;
    const owners = this.owners;
    const visited = this.visited;
    visited.fill(0, 0, n);
    let at = lowerBound(points, hashString(chwblKey(ctx.request.text, adapter, this.options)));
    if (at === points.length) at = 0;
    let fallback = -1;
    let home = -1;
    let seen = 0;
    for (let k = 0; k < points.length && seen < count; k++) {
      const i = owners[at]!;
      if (++at === points.length) at = 0;
      if (visited[i] === 1 || alive[i] === 0) continue;
      visited[i] = 1;
      seen++;
      if (home < 0) home = i;
      const served = candidates[i]!.servedModels;
      if (adapter !== undefined && served !== undefined && !served.has(adapter)) continue;
      if (fallback < 0) fallback = i;
      if (total === 0 || candidates[i]!.inFlight + 1 <= bound) {
        return { index: i, branch: seen === 1 ? "ring_home" : "ring_walk" };
      }
    }
    // No alive endpoint serves the adapter: the key's own endpoint (the filters decide who may).
    return { index: fallback >= 0 ? fallback : home, branch: "ring_default" };
  }

  /**
   * The ring of this candidate list: the last one used when the list is the same (ids, in order),
   * else one of the few kept (a retry's list without the tried worker, another model's workers),
   * else built (sorting replication × n points) and kept, the least recently used dropped.
   */
  private ensureRing(ctx: SchedulingContext): void {
    const { candidates } = ctx;
    const n = candidates.length;
    if (this.visited.length < n) this.visited = new Uint8Array(n);
    if (sameIds(this.ringIds, candidates)) return;
    let ring = this.rings.find((r) => sameIds(r.ids, candidates));
    if (ring === undefined) {
      ring = buildRing(candidates, this.options.replication);
      if (this.rings.length >= KEPT_RINGS) this.rings.shift();
    } else {
      this.rings.splice(this.rings.indexOf(ring), 1);
    }
    this.rings.push(ring);
    this.ringIds = ring.ids;
    this.points = ring.points;
    this.owners = ring.owners;
  }
}

/** Candidate lists whose rings are kept (a list's ring is replication × n points). */
const KEPT_RINGS = 4;

interface Ring {
  readonly ids: string[];
  readonly points: Uint32Array;
  readonly owners: Uint32Array;
}

function sameIds(ids: readonly string[], candidates: readonly { readonly id: string }[]): boolean {
  if (ids.length !== candidates.length) return false;
  for (let i = 0; i < ids.length; i++) if (ids[i] !== candidates[i]!.id) return false;
  return true;
}

/** `replication` points per candidate (a hash of its id and the point's number), sorted. */
function buildRing(candidates: readonly { readonly id: string }[], replication: number): Ring {
  const pairs: [number, number][] = [];
  for (let i = 0; i < candidates.length; i++) {
    const id = candidates[i]!.id;
    for (let v = 0; v < replication; v++) pairs.push([hashString(`${id}${v}`), i]);
  }
  pairs.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  return {
    ids: candidates.map((c) => c.id),
    points: Uint32Array.from(pairs, (p) => p[0]),
    owners: Uint32Array.from(pairs, (p) => p[1]),
  };
}

/** The key KubeAI hashes: the adapter and the first characters of the first user message. */
export function chwblKey(
  text: string,
  adapter: string | undefined,
  options: { readonly prefixChars: number },
): string {
  const marker = text.indexOf("<user>");
  let start = 0;
  let end = text.length;
  if (marker >= 0) {
    start = marker + "<user>".length;
    const next = text.indexOf("\n<", start);
    if (next >= 0) end = next;
  }
  const prefix = text.slice(start, Math.min(end, start + options.prefixChars));
  return adapter === undefined ? prefix : `${prefix}${adapter}`;
}

/** FNV-1a over UTF-16 code units, finished by fmix32: an unsigned 32-bit ring position. */
function hashString(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return fmix32(h);
}

/** First index whose point is ≥ key (points.length when none). */
function lowerBound(points: Uint32Array, key: number): number {
  let lo = 0;
  let hi = points.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (points[mid]! < key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
