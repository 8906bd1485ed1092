import { hashString, lowerBound, RingCache } from "./hash-ring.js";
import { type RandomSource, randomIndex } from "./options.js";
import {
  onAlive,
  type Pick,
  type Picker,
  type SchedulingContext,
  type SchedulingWorker,
} from "./plugin.js";
import type { RouteRequest } from "./policy.js";

/*
 * The keyed pickers: SGLang's keyed policies (sgl-project/sglang sgl-model-gateway/src/policies/)
 * prefix_hash, consistent_hashing and manual, and KubeAI's CHWBL, each a key onto a worker. SGLang's branch metrics map onto the router's
 * branches: ring_hit → ring_home, load_balance_walk → ring_walk, fallback_least_load →
 * least_load, routing_key_hit → ring_home, target_worker_hit → target_worker, random_fallback and
 * no_routing_id → random, occupied_hit → session, vacant and occupied_miss → key_assigned.
 */

/** SGLang's header naming a routing key (sgl-model-gateway routers/header_utils.rs). */
export const ROUTING_KEY_HEADER = "x-smg-routing-key";
/** SGLang's header naming the worker to use (consistent_hashing only). */
export const TARGET_WORKER_HEADER = "x-smg-target-worker";

/** The first non-empty value of a request header, when the request carries it. */
function header(request: RouteRequest, name: string): string | undefined {
  const value = request.headers?.[name];
  const first = Array.isArray(value) ? value[0] : value;
  return first === undefined || first === "" ? undefined : first;
}

/** The first candidate with the fewest in-flight requests (SGLang's min_by_key). */
function leastLoaded(candidates: readonly SchedulingWorker[], admit?: (i: number) => boolean) {
  let best = -1;
  for (let i = 0; i < candidates.length; i++) {
    if (admit !== undefined && !admit(i)) continue;
    if (best < 0 || candidates[i]!.inFlight < candidates[best]!.inFlight) best = i;
  }
  return best;
}

/**
 * Bounded loads, the rule of both hashed rings (SGLang's prefix_hash, KubeAI's CHWBL): a worker
 * takes its keys while its in-flight count, counting this request, is at most loadFactor ×
 * (total in-flight + 1) / n over the n alive candidates; any worker does while nothing is in flight.
 */
class LoadBound {
  private total = 0;
  private limit = 0;

  /** Measures the alive candidates (all, without `alive`); returns how many there are. */
  measure(candidates: readonly SchedulingWorker[], alive: Uint8Array | undefined, factor: number) {
    let count = 0;
    let total = 0;
    for (let i = 0; i < candidates.length; i++) {
      if (alive !== undefined && alive[i] === 0) continue;
      count++;
      total += candidates[i]!.inFlight;
    }
    this.total = total;
    this.limit = (factor * (total + 1)) / count;
    return count;
  }

  /**
   * Whether a worker with `inFlight` requests may take one more. SGLang counts the request in the
   * total only (prefix_hash.rs), KubeAI on the worker too (`countThisRequest`: chwblLoadOK).
   */
  admits(inFlight: number, countThisRequest = 0): boolean {
    return this.total === 0 || inFlight + countThisRequest <= this.limit;
  }
}

/** Characters per token of the routing text, as the block-hash profiles count (blocks of 16 tokens × 4). */
const CHARS_PER_TOKEN = 4;

export interface PrefixHashOptions {
  /** prefix_token_count: the prompt's first tokens hashed onto the ring (SGLang 256). */
  readonly prefixTokenCount: number;
  /** load_factor: a worker is overloaded past this × the mean in-flight, counting this request. */
  readonly loadFactor: number;
  /** Points per worker on the ring. */
  readonly replication: number;
}

/**
 * SGLang's prefix_hash (policies/prefix_hash.rs): the prompt's first prefix_token_count tokens
 * (here 4 characters each of the routing text) hashed onto a consistent ring; the key's worker
 * takes it while its load is at most load_factor × (total in-flight + 1) / n, else the least loaded
 * of the workers within that bound, else the key's worker anyway. SGLang routes only tokenized
 * (gRPC) requests so and returns no worker without tokens; an empty text here goes to the least
 * loaded, as its ring-less fallback does. Never reads the prefix index.
 */
export class PrefixHashPicker implements Picker {
  readonly type = "prefix-hash-picker";
  readonly usesPrefixes = false;
  private readonly rings: RingCache;
  private readonly bound = new LoadBound();
  constructor(
    readonly name: string,
    private readonly options: PrefixHashOptions,
  ) {
    this.rings = new RingCache(options.replication);
  }

  pick(ctx: SchedulingContext): Pick | -1 {
    return onAlive(ctx, this.choose);
  }

  private readonly choose = (ctx: SchedulingContext): Pick | -1 => {
    const { candidates, request } = ctx;
    if (request.text.length === 0) return { index: leastLoaded(candidates), branch: "least_load" };
    const bound = this.bound;
    bound.measure(candidates, undefined, this.options.loadFactor);
    const ok = (i: number) => bound.admits(candidates[i]!.inFlight);
    const key = request.text.slice(0, this.options.prefixTokenCount * CHARS_PER_TOKEN);
    const home = this.rings.home(candidates, key);
    if (ok(home)) return { index: home, branch: "ring_home" };
    const least = leastLoaded(candidates, ok);
    return { index: least >= 0 ? least : home, branch: "ring_walk" };
  };
}

/**
 * SGLang's consistent_hashing (policies/consistent_hashing.rs):
 * 1. `x-smg-target-worker: N` routes to the N-th candidate (0-based; here a worker id is taken
 *    too), or to none when it is not one (the client asked for that worker: 503, not another);
 * 2. `x-smg-routing-key`, else the first of Authorization, X-Forwarded-For and Cookie, hashed
 *    onto a consistent ring of the candidates (a key moves only when its worker leaves);
 * 3. otherwise a random candidate.
 * SGLang's ring hashes worker URLs with blake3 at 150 points each; here the ids, FNV-1a + fmix32.
 */
export class ConsistentHashingPicker implements Picker {
  readonly type = "consistent-hashing-picker";
  readonly usesPrefixes = false;
  private readonly rings: RingCache;
  constructor(
    readonly name: string,
    replication: number,
    private readonly random: RandomSource,
  ) {
    this.rings = new RingCache(replication);
  }

  pick(ctx: SchedulingContext): Pick | -1 {
    const { candidates, alive, request } = ctx;
    const target = header(request, TARGET_WORKER_HEADER);
    if (target !== undefined) {
      const n = /^\d+$/.test(target) ? Number(target) : -1;
      const i = n >= 0 ? n : candidates.findIndex((c) => c.id === target);
      return i < candidates.length && i >= 0 && alive[i] === 1
        ? { index: i, branch: "target_worker" }
        : -1;
    }
    const key =
      header(request, ROUTING_KEY_HEADER) ??
      header(request, "authorization") ??
      header(request, "x-forwarded-for") ??
      header(request, "cookie");
    return onAlive(ctx, (c) =>
      key === undefined
        ? { index: randomIndex(this.random, c.candidates.length), branch: "random" }
        : { index: this.rings.home(c.candidates, key), branch: "ring_home" },
    );
  }
}

/** Workers remembered per routing key (SGLang MAX_CANDIDATE_WORKERS). */
const WORKERS_PER_KEY = 2;

/**
 * SGLang's manual policy (policies/manual.rs): sticky routing by key. The key is the
 * `x-smg-routing-key` header, else the request's session (--session-affinity's source). A known
 * key goes to the first of its remembered workers (at most 2) that is a candidate ("session");
 * a new key, or one whose workers are all gone, goes to a random candidate, remembered ("key_assigned");
 * no key: a random candidate. Keys are never moved when workers join. SGLang forgets keys idle for
 * --max-idle-secs (4 h); here the least recently used past `maxKeys` is forgotten (bounded memory).
 */
export class ManualPicker implements Picker {
  readonly type = "manual-picker";
  readonly usesPrefixes = false;
  /** Key → worker ids, most recent last; a Map's order makes its first key the least recently used. */
  private readonly keys = new Map<string, string[]>();
  constructor(
    readonly name: string,
    private readonly maxKeys: number,
    private readonly random: RandomSource,
  ) {}

  /** Routing keys remembered now. */
  get size(): number {
    return this.keys.size;
  }

  pick(ctx: SchedulingContext): Pick | -1 {
    return onAlive(ctx, this.choose);
  }

  private readonly choose = (ctx: SchedulingContext): Pick | -1 => {
    const { candidates, request } = ctx;
    const key = header(request, ROUTING_KEY_HEADER) ?? request.session;
    const drawn = randomIndex(this.random, candidates.length);
    if (key === undefined) return { index: drawn, branch: "random" };
    const ids = this.keys.get(key);
    if (ids !== undefined) {
      this.keys.delete(key);
      this.keys.set(key, ids);
      for (const id of ids) {
        const i = candidates.findIndex((c) => c.id === id);
        if (i >= 0) return { index: i, branch: "session" };
      }
      ids.push(candidates[drawn]!.id);
      if (ids.length > WORKERS_PER_KEY) ids.shift();
      return { index: drawn, branch: "key_assigned" };
    }
    this.keys.set(key, [candidates[drawn]!.id]);
    if (this.keys.size > this.maxKeys) {
      const oldest = this.keys.keys().next().value;
      if (oldest !== undefined) this.keys.delete(oldest);
    }
    return { index: drawn, branch: "key_assigned" };
  };
}

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
  private readonly bound = new LoadBound();
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
    const bound = this.bound;
    const count = bound.measure(candidates, alive, this.options.loadFactor);
    if (count === 0) return -1;
    const { points, owners } = this.rings.of(candidates);
    if (this.visited.length < n) this.visited = new Uint8Array(n);
    const adapter = ctx.request.adapter;
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
      if (bound.admits(candidates[i]!.inFlight, 1)) {
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
