import { hashString, lowerBound, RingCache } from "./hash-ring.js";
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
  private readonly rings: RingCache;
  private visited = new Uint8Array(0);

  constructor(
    readonly name: string,
    private readonly options: ChwblOptions,
  ) {
    this.rings = new RingCache(options.replication);
  }

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
    const { points, owners } = this.rings.of(candidates);
    if (this.visited.length < n) this.visited = new Uint8Array(n);
    const adapter = ctx.request.adapter;
    const bound = (this.options.loadFactor * (total + 1)) / count;
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
