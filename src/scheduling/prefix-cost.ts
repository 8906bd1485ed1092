import { adapterNamed } from "../workers/served-models.js";
import { loadCap, ownLoad } from "./load-cap.js";
import type { ResolvedPolicyOptions, TieBreak } from "./options.js";
import { onAlive, type Pick as Picked, type Picker, type SchedulingContext } from "./plugin.js";
import { type PolicyWorker, prefillAhead, type RouteRequest } from "./policy.js";
import { KEY_ALIGN, KEY_CHARS, prefixKey, rendezvousScore } from "./prefix-hash.js";
import { Rotation, spreadOffset } from "./rotation.js";

/** Candidates a tie can hold, as packed with their score (settleTie); far more than a fleet. */
const TIE_SLOTS = 1 << 16;

export type PrefixCostOptions = Pick<
  ResolvedPolicyOptions,
  "prefixCostQueueWeight" | "prefixCostRequestChars"
> &
  Partial<
    Pick<
      ResolvedPolicyOptions,
      | "prefixCostTieBreak"
      | "cacheLoadBound"
      | "prefixCostEvictionWeight"
      | "prefixCostLoraLoadChars"
      | "prefixCostChurnHalfLife"
    >
  >;

/**
 * Picks the candidate with the lowest estimated time to first token, counted in characters of
 * prefill work (prefill dominates TTFT and is proportional to the uncached prompt):
 *
 *   cost = (text length − matched)                   this request's own uncached prefill there,
 *          × (1 + evictionWeight × fill)              and what it evicts from a full cache
 *        + queueWeight × pendingPrefillChars          uncached prefill already queued there
 *                                                     (by this router, and by its peers as they
 *                                                     last reported it and decided since); for
 *                                                     a request the engine serves before all of
 *                                                     this router's there, only the part still
 *                                                     under way (prefillAhead)
 *        + queueWeight × foreign × text length        engine-queued requests the router did not
 *                                                     send (another replica's, direct clients'),
 *                                                     each guessed as long as this one, uncached
 *        + requestChars × inFlight                    each running request's share of every step
 *        + loraLoadChars, where the engine holds      the adapter's load before the prefill
 *          the request's adapter unloaded
 *        + queueWeight × claimed + requestChars,      a peer's decision on a new prefix, known
 *          on the worker a peer's claim names         from its claim before its op (claimedWork)
 *
 * foreign = the engine's reported queue (sglang:num_queue_reqs, vllm:num_requests_waiting, when
 * fresh) minus this router's own requests that were waiting for a first byte there when the engine
 * reported it, never below 0 (Worker.foreignQueuedAt): the engine's queue includes those, counted
 * in pendingPrefillChars while they wait. Subtracting today's count instead would turn a report
 * taken seconds ago (polled every 5 s) into phantom foreign work whenever the router's own queue
 * there happens to be shorter now than then, and push a tenant off its holder.
 *
 * fill = how full the worker's cache is, as the prefix index sees it (what the router sent there
 * against the engine's learned KV capacity; RouteRequest.fill, 0 while unknown). Each uncached
 * character computed in a full cache evicts a cached one, and what is evicted is mostly other
 * tenants' prefixes that their next requests recompute: a cost the request's own prefill does not
 * show. Without it, a moment's load difference (a burst of requests on the holder, a slow step)
 * moved a tenant into another full cache, whose evictions pushed other tenants on, and small
 * timing differences cascaded into hit rates 5-10 points apart between identical runs. With it,
 * a holder keeps its prefix until the queue elsewhere is shorter by (1 + weight × fill) times what
 * it holds: hysteresis that grows as the caches fill, and none while they have room.
 *
 * A worker that holds the prefix wins while the work queued on it stays below what a cold worker
 * would have to recompute; once it falls behind by more than that, the next request goes where it
 * finishes prefill first, so one hot prefix spreads by the work it causes rather than by a count.
 * Equal costs go to the less loaded worker, then take turns. Matched lengths come from the prefix
 * index (request.matched), the queue figures from the forwarder (Worker.pendingPrefillChars).
 *
 * Near-equal costs, with tie-break `hash` (the default) and some worker holding part of the text:
 * every candidate within half of requestChars of the lowest cost is a tie; of those, the ones
 * holding about the most of the text, and of those the winner of a rendezvous hash of the end of
 * that held prefix (prefix-hash.ts). Near-ties among the holders of one prefix (every worker that
 * holds a shared preamble, when a new tenant comes) then go to the same worker whenever the load
 * does not say otherwise, not to whichever had one request or a few hundred characters less in
 * flight at that instant, which placed new tenants differently from run to run (issue 27). A text
 * nobody holds any of keeps the rotation: there is no prefix to keep together.
 *
 * With queueWeight 0 the queue no longer counts, and one in-flight request's few hundred
 * characters never outweigh a held prefix of thousands: every request of a prefix went to its
 * holder (a multi-tenant run put all 256 requests on one worker, at 6× the mean latency). Then
 * the load cap of --cache-load-bound (load-cap.ts) applies: a worker above it is not a candidate.
 * The configuration refuses queue weight 0 with no cap (scheduling/settings.ts).
 *
 * A new prefix (every candidate holds about as much of the text, at least KEY_CHARS: a new
 * tenant's prompt after a preamble they all hold) is the exception with a churn half-life > 0
 * (off by default: it narrowed the spread on average in the replay, not in every cell):
 * among the candidates whose cost is within its own uncached prefill of the lowest, it goes to
 * the one whose cache churned least (Churn: the uncached characters this router sent there,
 * decaying). Among workers that hold the same preamble, the costs differ only by the load of that
 * instant, one request more in flight or a prefill not yet done; placing on that sent each new
 * tenant's home by the timing of the moment, and identical runs ended with different tenant ->
 * worker maps, some putting popular tenants together in one cache whose blocks then evicted each
 * other (hit rates several points apart; docs/benchmarks.md). The churn follows what the
 * caches already host (each tenant's uncached work, times how often it comes), so the map follows
 * the sequence of requests rather than their timing, and a new tenant lands where it evicts
 * least. A real load difference (more than that prefill) still decides.
 *
 * --policy prefix_cost is the profile of this picker alone (builtin-profiles.ts); the same cost,
 * min-max normalised, is the prefill-work-scorer (prefix-scorers.ts).
 */
export class PrefixCostPicker implements Picker {
  readonly type = "prefix-cost-picker";
  readonly usesPrefixes = true;
  private readonly rotation = new Rotation();
  private readonly queueWeight: number;
  private readonly requestChars: number;
  private readonly tieBreak: TieBreak;
  private readonly evictionWeight: number;
  private readonly loraLoadChars: number;
  /** --cache-load-bound, applied only when the queue weight is 0 (see above). */
  private readonly loadBound: number;
  /** Uncached characters sent to each worker, decaying; undefined when off. */
  private readonly churn: Churn | undefined;
  /** Reused across decisions (select is synchronous and keeps nothing). */
  private readonly costs: number[] = [];
  private readonly held: number[] = [];
  private readonly tied: number[] = [];

  constructor(
    readonly name: string,
    options: PrefixCostOptions,
  ) {
    this.queueWeight = options.prefixCostQueueWeight;
    this.requestChars = options.prefixCostRequestChars;
    this.tieBreak = options.prefixCostTieBreak ?? "hash";
    this.evictionWeight = options.prefixCostEvictionWeight ?? 0;
    this.loraLoadChars = options.prefixCostLoraLoadChars ?? 0;
    this.loadBound = this.queueWeight === 0 ? (options.cacheLoadBound ?? 0) : 0;
    const halfLife = options.prefixCostChurnHalfLife ?? 0;
    this.churn = halfLife > 0 ? new Churn(halfLife) : undefined;
  }

  pick(ctx: SchedulingContext): Picked | -1 {
    return onAlive(ctx, this.choose);
  }

  private readonly choose = (ctx: SchedulingContext): Picked | -1 => {
    const { candidates, request, length } = ctx;
    const n = candidates.length;
    if (n === 0) return -1;
    // A rotated start, so equal costs on equal loads take turns (from a place of this replica's).
    const start = this.rotation.next(n, request.replicaRank);
    const matchedOf = request.matched;
    const fill = placementFill(request.fill, matchedOf, n);
    // One clock read per decision (the profile's): every engine report is judged against it.
    const now = ctx.now;
    const cap =
      this.loadBound === 0 ? Number.POSITIVE_INFINITY : loadCap(candidates, this.loadBound);
    // The adapter the request names (SGLang's lora_path, else the model): a load where the engine
    // holds it unloaded. Undefined residency (a base model, nothing known) costs nothing.
    const adapter =
      this.loraLoadChars > 0 ? adapterNamed(request.requested, request.adapter) : undefined;
    let best = start;
    let bestCost = Number.POSITIVE_INFINITY;
    let bestLoad = 0;
    let anyHeld = false;
    const costs = this.costs;
    const held = this.held;
    costs.length = n;
    held.length = n;
    for (let i = 0; i < n; i++) {
      let index = start + i;
      if (index >= n) index -= n;
      const worker = candidates[index]!;
      // Clamped: an index may claim more than the text (never fewer than 0 characters to compute).
      const matched = length === 0 ? 0 : Math.min(length, Math.max(0, matchedOf?.[index] ?? 0));
      // Over the cap: never chosen (the least loaded is always within it).
      const cost =
        ownLoad(worker) > cap
          ? Number.POSITIVE_INFINITY
          : this.cost(worker, matched, length, now, fill?.[index] ?? 0, request.priority) +
            (adapter !== undefined && worker.loraResident?.(adapter, now) === false
              ? this.loraLoadChars
              : 0) +
            claimedWork(request, index, this.queueWeight, this.requestChars);
      costs[index] = cost;
      held[index] = matched;
      if (matched > 0) anyHeld = true;
      if (cost < bestCost || (cost === bestCost && worker.inFlight < bestLoad)) {
        best = index;
        bestCost = cost;
        bestLoad = worker.inFlight;
      }
    }
    const fresh = this.churn !== undefined && anyHeld && n > 1 ? newPrefixHeld(costs, held, n) : -1;
    if (fresh >= 0) {
      best = this.leastChurn(
        candidates,
        request.text,
        fresh,
        bestCost + Math.max(this.requestChars, length - fresh),
        best,
        request.replicaRank ?? 0,
      );
    } else if (this.tieBreak === "hash" && anyHeld && n > 1) {
      best = this.settleTie(
        candidates,
        request.text,
        bestCost + this.requestChars / 2,
        best,
        request.replicaRank ?? 0,
      );
    }
    this.churn?.add(candidates[best]!, length - held[best]!);
    return { index: best, branch: "lowest_cost" };
  };

  /**
   * Among the candidates whose cost is at most `limit`, the one whose cache churned least; equal
   * churn (a cold router) by a rendezvous hash of the end of the `held` characters they all hold,
   * keyed apart per replica rank so that replicas starting together do not all send their first
   * new tenants to one worker. `fallback` when none is within the limit.
   */
  private leastChurn(
    candidates: readonly PolicyWorker[],
    text: string,
    held: number,
    limit: number,
    fallback: number,
    rank: number,
  ): number {
    const churn = this.churn!;
    const key = prefixKey(text, held - (held % KEY_ALIGN)) ^ Math.imul(rank, 0x9e3779b1);
    let best = fallback;
    let least = Number.POSITIVE_INFINITY;
    let bestScore = -1;
    for (let i = 0; i < candidates.length; i++) {
      if (this.costs[i]! > limit) continue;
      const c = churn.of(candidates[i]!);
      if (c > least) continue;
      const score = rendezvousScore(key >>> 0, candidates[i]!.id);
      if (c < least || score > bestScore) {
        best = i;
        least = c;
        bestScore = score;
      }
    }
    return best;
  }

  /**
   * Among the candidates whose cost is at most `limit`: those holding about the most of the text
   * (within an eighth of it, at most KEY_CHARS: tenants' prompts share a few leading characters by
   * chance, which says nothing about where the tenant is), then the highest rendezvous score for
   * the KEY_CHARS characters from that floor (rounded down to KEY_ALIGN): the end of the prefix
   * they hold. `fallback` when none is within the limit.
   *
   * When they hold less than KEY_CHARS (another worker holds a shared preamble but is busier),
   * the key is the text's first characters, the same for every tenant: one router then sends
   * every such text to one worker, which soon holds the preamble too (spreading them over the
   * rotation cost one router 18% of its TTFT in the replay, each new worker computing the
   * preamble again). Replicas, though, all chose that one worker at once, before any saw the
   * others' decisions: replica `rank` > 0 takes the candidate at its place (rotation.ts
   * spreadOffset) in the scores' order instead, its own worker for such texts.
   */
  private settleTie(
    candidates: readonly PolicyWorker[],
    text: string,
    limit: number,
    fallback: number,
    rank: number,
  ): number {
    const { costs, held } = this;
    let most = -1;
    for (let i = 0; i < candidates.length; i++) {
      if (costs[i]! <= limit && held[i]! > most) most = held[i]!;
    }
    if (most < 0) return fallback;
    const floor = most - Math.min(KEY_CHARS, Math.floor(most / 8));
    const spread = rank > 0 && most < KEY_CHARS && candidates.length <= TIE_SLOTS;
    const tied = this.tied;
    tied.length = 0;
    let best = fallback;
    let bestScore = -1;
    let key: number | undefined;
    for (let i = 0; i < candidates.length; i++) {
      if (costs[i]! > limit || held[i]! < floor) continue;
      // Keyed from a rounded point, so a few characters more or less held do not change the key.
      key ??= prefixKey(text, floor - (floor % KEY_ALIGN));
      const score = rendezvousScore(key, candidates[i]!.id);
      if (spread) tied.push(score * TIE_SLOTS + i);
      if (score > bestScore) {
        best = i;
        bestScore = score;
      }
    }
    if (!spread || tied.length < 2) return best;
    // Highest score first; the index rides in the low digits (scores are 32-bit, exact in a double).
    tied.sort((x, y) => y - x);
    return tied[spreadOffset(rank, tied.length)]! % TIE_SLOTS;
  }

  /** The estimated prefill work ahead of this request's first token on `worker` (formula above). */
  cost(
    worker: PolicyWorker,
    matched: number,
    length: number,
    now: number,
    fill = 0,
    priority?: number,
  ): number {
    return prefillWork(
      worker,
      matched,
      length,
      now,
      this.queueWeight,
      this.requestChars,
      this.evictionWeight * fill,
      priority,
    );
  }
}

/**
 * The prefill work ahead of a request's first token on `worker`, in characters (the formula of
 * PrefixCostPicker): written once, for its picker and the prefill-work-scorer.
 */
export function prefillWork(
  worker: PolicyWorker,
  matched: number,
  length: number,
  now: number,
  queueWeight: number,
  requestChars: number,
  eviction = 0,
  /** The engines' priority for the request (RouteRequest.priority). */
  priority?: number,
): number {
  const queued = prefillAhead(worker, priority, now);
  const foreign = Math.max(0, worker.foreignQueuedAt?.(now) ?? 0);
  return (
    (length - matched) * (1 + eviction) +
    queueWeight * (queued + foreign * length) +
    requestChars * worker.inFlight
  );
}

/**
 * What another replica's decision, known from its claim (RouteRequest.claimed), adds to candidate
 * `index`'s prefill work: its uncached characters queued and one more request in flight, as the
 * worker's own figures will count it once the decision reaches this replica.
 */
export function claimedWork(
  request: RouteRequest,
  index: number,
  queueWeight: number,
  requestChars: number,
): number {
  const claimed = request.claimed;
  return claimed === undefined || claimed.index !== index
    ? 0
    : queueWeight * claimed.chars + requestChars;
}

/**
 * Each candidate's fill as the eviction term weighs it: the index's (RouteRequest.fill) when some
 * candidate holds at least KEY_CHARS of the text, else none (texts share a chat template's first
 * characters by chance, which makes no holder). With no prefix held anywhere there is no holder to
 * keep and the term would only draw the text to the emptiest cache whatever its queue (a
 * workload with no sharing lost 9% of its TTFT to that while the caches warmed up at different
 * rates); with a prefix held, a cache with room evicts less and is rightly cheaper.
 */
export function placementFill(
  fill: readonly number[] | undefined,
  matched: readonly number[] | undefined,
  n: number,
): readonly number[] | undefined {
  if (fill === undefined || matched === undefined) return undefined;
  for (let i = 0; i < n; i++) if ((matched[i] ?? 0) >= KEY_CHARS) return fill;
  return undefined;
}

/**
 * The characters every candidate with a finite cost holds of the text (the most any holds) when
 * they hold about the same, within KEY_CHARS, and at least KEY_CHARS: the text is new past a
 * prefix they share. -1 otherwise (some worker holds more of it, or nobody holds a prefix).
 */
function newPrefixHeld(costs: readonly number[], held: readonly number[], n: number): number {
  let least = Number.POSITIVE_INFINITY;
  let most = 0;
  for (let i = 0; i < n; i++) {
    if (costs[i] === Number.POSITIVE_INFINITY) continue;
    if (held[i]! < least) least = held[i]!;
    if (held[i]! > most) most = held[i]!;
  }
  return most >= KEY_CHARS && most - least < KEY_CHARS ? most : -1;
}

/**
 * How much each worker's cache churns, as this router caused it: the uncached characters of the
 * requests it sent there (what their prefill wrote into the cache, evicting as much once full),
 * halving every `halfLife` decisions. Counted in decisions, not time, so that it follows the
 * sequence of requests and not their timing. Kept per worker object (a worker that leaves the
 * fleet takes its entry with it).
 */
export class Churn {
  private readonly entries = new WeakMap<PolicyWorker, { chars: number; at: number }>();
  private decisions = 0;
  private readonly decay: number;

  constructor(halfLife: number) {
    this.decay = Math.log(2) / halfLife;
  }

  /** The worker's churn as of now. */
  of(worker: PolicyWorker): number {
    const e = this.entries.get(worker);
    return e === undefined ? 0 : e.chars * Math.exp(-this.decay * (this.decisions - e.at));
  }

  /** One decision sent `chars` uncached characters to `worker`. */
  add(worker: PolicyWorker, chars: number): void {
    const before = this.of(worker);
    this.decisions++;
    const e = this.entries.get(worker);
    const value = before * Math.exp(-this.decay) + Math.max(0, chars);
    if (e === undefined) this.entries.set(worker, { chars: value, at: this.decisions });
    else {
      e.chars = value;
      e.at = this.decisions;
    }
  }
}
