import { fmix32 } from "../hash/fmix32.js";

/**
 * Consistent-hash rings over a candidate list (KubeAI's CHWBL, SGLang's consistent_hashing and
 * prefix_hash): `replication` points per candidate, a hash of its id and the point's number,
 * sorted. Kept per recent candidate list (ids only: no worker is kept), so a retry's list
 * without the tried worker, or another model's workers, do not rebuild the ring every time.
 */
export class RingCache {
  private ringIds: readonly string[] = [];
  private last: Ring = { ids: [], points: new Uint32Array(0), owners: new Uint32Array(0) };
  /** Rings of recent candidate lists, least recently used first. */
  private readonly rings: Ring[] = [];

  constructor(private readonly replication: number) {}

  /**
   * The ring of this candidate list: the last one used when the list is the same (ids, in order),
   * else one of the few kept, else built (sorting replication × n points) and kept, the least
   * recently used dropped. owners[k] is the candidate index of points[k].
   */
  of(candidates: readonly { readonly id: string }[]): Ring {
    if (sameIds(this.ringIds, candidates)) return this.last;
    let ring = this.rings.find((r) => sameIds(r.ids, candidates));
    if (ring === undefined) {
      ring = buildRing(candidates, this.replication);
      if (this.rings.length >= KEPT_RINGS) this.rings.shift();
    } else {
      this.rings.splice(this.rings.indexOf(ring), 1);
    }
    this.rings.push(ring);
    this.ringIds = ring.ids;
    this.last = ring;
    return ring;
  }

  /** The candidate index whose point comes first clockwise from `key`'s (-1 without candidates). */
  home(candidates: readonly { readonly id: string }[], key: string): number {
    const { points, owners } = this.of(candidates);
    if (points.length === 0) return -1;
    let at = lowerBound(points, hashString(key));
    if (at === points.length) at = 0;
    return owners[at]!;
  }
}

/** Candidate lists whose rings are kept (a list's ring is replication × n points). */
const KEPT_RINGS = 4;

export interface Ring {
  readonly ids: readonly string[];
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

/** FNV-1a over UTF-16 code units, finished by fmix32: an unsigned 32-bit ring position. */
export function hashString(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return fmix32(h);
}

/** First index whose point is ≥ key (points.length when none). */
export function lowerBound(points: Uint32Array, key: number): number {
  let lo = 0;
  let hi = points.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (points[mid]! < key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
