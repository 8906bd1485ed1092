import type { TokenizeInput } from "./tokenize-input.js";

/**
 * The prefix index seam: "for this request, how much of its text does each worker probably hold?"
 *
 * Policies never see an index: the decider (scheduling/scheduler.ts) asks the index for matched
 * lengths, hands them to the policy, and tells the index what was routed where. Several indexes
 * can answer behind this one interface (approximate per-worker trees, a fleet-wide shared tree, a
 * precise index fed by the engines' KV events); each reports its name so that logs and the
 * x-radixgate-route header can say which one produced a decision.
 *
 * Lengths are in UTF-16 code units of the routing text, always at a code point boundary.
 */
export interface PrefixIndex {
  /** Short name for logs and headers ("approx", "shared", "precise", ...). */
  readonly name: string;

  /** Starts tracking a worker (no-op when already tracked). */
  addWorker(workerId: string): void;

  /** Forgets everything about a worker (it left the fleet). */
  removeWorker(workerId: string): void;

  /**
   * out[i] = how many leading characters of `text` workers[i] probably holds for `model`.
   * Pure: does not change recency. `out` is overwritten from 0 to workers.length - 1.
   */
  match(
    text: string,
    model: string | undefined,
    workers: readonly { readonly id: string }[],
    out: number[],
  ): void;

  /**
   * `text` was routed to the worker: it will cache it. Refreshes recency; may evict. `uncached`:
   * the characters of it the decision expected the worker to prefill (the replication shares it
   * with the decision; indexes ignore it).
   */
  insert(workerId: string, model: string | undefined, text: string, uncached?: number): void;

  /**
   * The worker holds no more than the first `keep` characters of `text`: forget the rest of that
   * path and everything below it (prefix caches are prefix-closed, so whatever extends a forgotten
   * prefix is gone too). Used when a worker did not accept a request, and when an engine reports
   * fewer cached tokens than the index claimed. Returns the characters forgotten.
   */
  truncate(workerId: string, model: string | undefined, text: string, keep: number): number;

  /**
   * Sets the worker's budget in characters (e.g. learned from its engine's KV capacity); the index
   * evicts down to it at once and keeps it there on every insert (no high-water slack, so the index
   * forgets what the engine forgets). Returns the characters evicted.
   */
  setBudget(workerId: string, chars: number): number;

  /**
   * Characters of the engine's KV that its running requests hold beyond the texts routed there
   * (what they generate, their last partial block): while set, the entry keeps its budget less
   * this, evicting at once, as the engine evicts cached prefixes to make room for them. Only on a
   * budget set through setBudget (the engine's capacity); 0 lifts it. Returns the characters
   * evicted.
   */
  reserve?(workerId: string, chars: number): number;

  /** Characters held for the worker (0 for an unknown worker). */
  size(workerId: string): number;

  /**
   * How full the worker's entry is: characters held over its budget (0 to 1), when the budget is
   * the engine's learned KV capacity (setBudget); undefined when the index does not know it. A
   * full entry means the engine's cache is full too: whatever a request adds there evicts as much.
   */
  fill?(workerId: string): number | undefined;

  /**
   * What the worker holds, as the texts of its tree's leaves, newest first, up to `maxChars`
   * distinct characters: inserting them again oldest first rebuilds it (a snapshot,
   * state/snapshot.ts). Undefined when the index cannot say (the block-hash index keeps hashes).
   */
  paths?(workerId: string, maxChars: number): IndexPath[] | undefined;

  /** The units the background eviction timer visits, one per turn of the event loop. */
  evictionUnits(): Iterable<EvictionUnit>;

  /**
   * Optional asynchronous step before `match` (e.g. the precise index tokenizes the request with
   * the engine's tokenizer). Returns undefined when there is nothing to wait for, so an index
   * without it adds no await to the request path.
   */
  prepare?(
    request: PrepareRequest,
    workers: readonly { readonly id: string }[],
  ): Promise<void> | undefined;

  /** Which index answered the last `match` for this worker (for logs and the route header). */
  sourceOf?(workerId: string): string;
  /**
   * For a worker whose engine runs data-parallel ranks, each with its own KV cache: the rank the
   * last `match` found best for it (most of the text held, then least loaded), which `insert`
   * records the text on and the request should be sent to; undefined when the index has no view
   * per rank (the engine's own balancer then chooses).
   */
  rankOf?(workerId: string): number | undefined;
}

/** One text a worker holds, for a model (undefined: the fleet serves one). */
export interface IndexPath {
  readonly model: string | undefined;
  readonly text: string;
}

/** What `prepare` sees of a request. */
export interface PrepareRequest {
  readonly text: string;
  readonly model?: string | undefined;
  /** The request in the form the engine's tokenizer takes it (tokenize-input.ts). */
  readonly tokenizeInput?: TokenizeInput | undefined;
}

/** Something that can evict down to its own budget; returns the characters evicted. */
export interface EvictionUnit {
  evict(): number;
}
