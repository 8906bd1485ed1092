import { ForwardingIndex } from "./forwarding-index.js";
import type { PrefixIndex } from "./prefix-index.js";
import { rankIndexId } from "./rank-id.js";

/** What the ranked index reads of the fleet: each worker's data-parallel ranks and their load. */
export interface RankSource {
  /** Data-parallel ranks the worker's engine said it runs (1 when it said nothing). */
  ranksOf(workerId: string): number;
  /** How busy one rank is (its engine's queue + this router's requests in flight there). */
  rankLoad(workerId: string, rank: number): number;
}

/** A ceiling on ranks followed per worker, whatever an engine claims (the engines' own: 16-64). */
const MAX_RANKS = 64;

/**
 * --dp-aware without --kv-events: a data-parallel engine keeps one KV cache per rank, so the
 * approximate index keeps one tree per rank (rank-id.ts ids), as SGLang's gateway keeps one
 * worker per `url@rank`. A worker's match is its best rank's (ties: the least busy rank);
 * `rankOf` names that rank, the request is sent there (proxy/dp-rank.ts) and `insert` records it
 * on that rank's tree. Engines without ranks pass straight through.
 */
export class RankedIndex extends ForwardingIndex {
  /** Workers with ranks → the ranks followed (trees exist for 0 .. n-1). */
  private readonly followed = new Map<string, number>();
  /** Workers with ranks → the rank their last match chose. */
  private readonly chosen = new Map<string, number>();
  private readonly rankIds: { id: string }[] = [];
  private readonly rankOut: number[] = [];

  constructor(
    inner: PrefixIndex,
    private readonly ranks: RankSource,
  ) {
    super(inner);
  }

  override removeWorker(workerId: string): void {
    const n = this.followed.get(workerId) ?? 1;
    for (let rank = 1; rank < n; rank++) this.inner.removeWorker(rankIndexId(workerId, rank));
    this.inner.removeWorker(workerId);
    this.followed.delete(workerId);
    this.chosen.delete(workerId);
  }

  override match(
    text: string,
    model: string | undefined,
    workers: readonly { readonly id: string }[],
    out: number[],
  ): void {
    // One inner match over every rank of every worker: ranks of one worker are adjacent.
    const ids = this.rankIds;
    ids.length = 0;
    const counts: number[] = [];
    for (const w of workers) {
      const n = this.follow(w.id);
      counts.push(n);
      for (let rank = 0; rank < n; rank++) ids.push({ id: rankIndexId(w.id, rank) });
    }
    if (ids.length === workers.length) {
      this.inner.match(text, model, workers, out);
      for (const w of workers) this.chosen.delete(w.id);
      return;
    }
    const held = this.rankOut;
    held.length = ids.length;
    this.inner.match(text, model, ids, held);
    let at = 0;
    for (let i = 0; i < workers.length; i++) {
      const id = workers[i]!.id;
      const n = counts[i]!;
      let best = -1;
      let bestRank = 0;
      let bestLoad = Number.POSITIVE_INFINITY;
      for (let rank = 0; rank < n; rank++) {
        const chars = held[at + rank]!;
        if (chars < best) continue;
        const load = n > 1 ? this.ranks.rankLoad(id, rank) : 0;
        if (chars > best || load < bestLoad) {
          best = chars;
          bestRank = rank;
          bestLoad = load;
        }
      }
      at += n;
      out[i] = best;
      if (n > 1) this.chosen.set(id, bestRank);
      else this.chosen.delete(id);
    }
  }

  override rankOf(workerId: string): number | undefined {
    return this.chosen.get(workerId);
  }

  override insert(workerId: string, model: string | undefined, text: string): void {
    this.inner.insert(this.chosenId(workerId), model, text);
  }

  override truncate(
    workerId: string,
    model: string | undefined,
    text: string,
    keep: number,
  ): number {
    return this.inner.truncate(this.chosenId(workerId), model, text, keep);
  }

  /** Each rank has a KV pool of its own: the worker's budget is split evenly between its ranks. */
  override setBudget(workerId: string, chars: number): number {
    const n = this.follow(workerId);
    let evicted = 0;
    for (let rank = 0; rank < n; rank++)
      evicted += this.inner.setBudget(rankIndexId(workerId, rank), Math.floor(chars / n));
    return evicted;
  }

  override size(workerId: string): number {
    const n = this.followed.get(workerId) ?? 1;
    let total = 0;
    for (let rank = 0; rank < n; rank++) total += this.inner.size(rankIndexId(workerId, rank));
    return total;
  }

  /** How full the cache the request goes to is: the chosen rank's (each rank has its own pool). */
  override fill(workerId: string): number | undefined {
    return this.inner.fill?.(this.chosenId(workerId));
  }

  private chosenId(workerId: string): string {
    return rankIndexId(workerId, this.chosen.get(workerId) ?? 0);
  }

  /** The ranks followed for the worker, grown (never shrunk) to what its engine says now. */
  private follow(workerId: string): number {
    const raw = this.ranks.ranksOf(workerId);
    const said = Number.isFinite(raw) ? Math.min(MAX_RANKS, Math.max(1, Math.floor(raw))) : 1;
    const now = this.followed.get(workerId) ?? 1;
    if (said <= now) return now;
    for (let rank = now; rank < said; rank++) this.inner.addWorker(rankIndexId(workerId, rank));
    this.followed.set(workerId, said);
    return said;
  }
}
