/**
 * The hybrid index (--kv-events): the engines' KV events are the truth for every worker whose
 * event stream is live; the base index (the approximate trees) answers for the others, and keeps
 * learning from routing decisions for all of them, so it is warm whenever a stream drops.
 *
 * - `prepare` tokenizes the request with the worker's tokenizer (cached per prefix), waiting at
 *   most `tokenizeBudgetMs`: past that the request routes precisely on the tokens of its longest
 *   cached prefix (a prompt's first lines, a chat's earlier turn or system messages), else on the
 *   approximate trees, and the answer, when it comes, serves the next request with that prefix.
 * - `match` answers, per worker, the matched fraction of the request's tokens (precise) mapped
 *   onto the routing text, or the base index's characters (approximate).
 * - `insert` holds the chosen worker's blocks speculatively (PreciseIndex TTL) until a BlockStored
 *   confirms them; `truncate` withdraws them when the worker did not accept the request. A request
 *   routed before its tokens came (past the budget) gets its speculative entries when they come,
 *   so that the next requests with its prefix follow it instead of starting a second copy.
 * - `sourceOf` says which index answered for a worker: "precise" or the base index's name.
 * - Data-parallel engines: each rank has its own KV cache and its own entry in the precise index
 *   (rank-id.ts). A worker's match is its best rank's (ties: the least busy rank, by its engine's
 *   reported queue + this router's requests in flight there); `rankOf` names that rank, `insert` records the request there.
 */

import { isHigh } from "../tree/edge-match.js";
import { ForwardingIndex } from "./forwarding-index.js";
import type { PreciseIndex } from "./precise-index.js";
import type { PrefixIndex, PrepareRequest } from "./prefix-index.js";
import { bestRank, rankIndexId } from "./rank-id.js";
import type { TokenizeInput } from "./tokenize-input.js";

/** How the hybrid index gets tokens and stream health; implemented by kv-events/manager.ts. */
export interface TokenSource {
  /** Whether the worker's event stream can be trusted now (every rank's, for a data-parallel engine). */
  isLive(workerId: string): boolean;
  /** Data-parallel ranks the worker's engine runs, each with its own cache (absent: 1). */
  ranksOf?(workerId: string): number;
  /** How busy one rank of the worker is: its engine-reported queue + this router's in-flight (absent: 0). */
  rankLoad?(workerId: string, rank: number): number;
  /** Tokens already known for the input (cache, or ids the client sent). */
  cached(model: string | undefined, input: TokenizeInput): readonly number[] | undefined;
  /**
   * Tokens of the longest cached prefix of the input (a prompt's first lines, a chat's first
   * messages) and the share of the input it covers, by characters; used when the whole input's
   * tokens do not come within the budget.
   */
  cachedPrefix?(
    model: string | undefined,
    input: TokenizeInput,
  ): { tokens: readonly number[]; fraction: number } | undefined;
  /** Tokens from one of these workers' tokenizer; undefined when none answers. */
  tokenize(
    workerIds: readonly string[],
    model: string | undefined,
    input: TokenizeInput,
  ): Promise<readonly number[] | undefined>;
}

export interface HybridIndexOptions {
  /** Longest wait for tokens before routing a request on the approximate trees. */
  tokenizeBudgetMs: number;
  /** Tokens per block before a worker's first BlockStored says (vLLM's default is 16). */
  defaultBlockSize: number;
  /** Called when a request routes approximately because tokens were not ready in time. */
  onTokenizeMiss?: (reason: "timeout" | "unavailable" | "prefix") => void;
}

/** The source name of a match the engines' events answered (x-radixgate-route, logs). */
export const PRECISE = "precise";

/** A prepared request's tokens; `total` is more than their count when they are a prefix's. */
interface Prepared {
  readonly tokens: readonly number[];
  readonly total: number;
  /**
   * The tokens stop before the chat's first media (LeadingMessages): past them only the
   * approximate trees, whose routing text carries each image's digest, can tell which worker
   * holds the image, so the match is the larger of the two answers.
   */
  readonly beforeMedia?: boolean;
}

/** Requests prepared and not yet decided; small: decide follows prepare at once. */
const MAX_PREPARED = 1024;

/** The base index is the inner one (ForwardingIndex): budgets, sizes and eviction are its. */
export class HybridIndex extends ForwardingIndex {
  private readonly ownName: string;
  /**
   * Model → routing text → its tokens, for the decide that follows prepare. Keyed by the text
   * itself (not a concatenation), so the lookups reuse the string's cached hash.
   */
  private readonly prepared = new Map<string, Map<string, Prepared>>();
  private preparedCount = 0;
  private readonly sources = new Map<string, string>();
  /**
   * Texts whose tokens missed the budget and are still on their way (model + NUL + text) → the
   * workers they were routed to meanwhile; bounded like `prepared`.
   */
  private readonly late = new Map<string, Set<string>>();
  /** Data-parallel workers → the rank their last match chose (see `rankOf`). */
  private readonly chosenRanks = new Map<string, number>();

  constructor(
    private readonly base: PrefixIndex,
    readonly precise: PreciseIndex,
    private readonly tokens: TokenSource,
    private readonly options: HybridIndexOptions,
  ) {
    super(base);
    this.ownName = `${PRECISE}+${base.name}`;
  }

  override get name(): string {
    return this.ownName;
  }

  override addWorker(workerId: string): void {
    this.base.addWorker(workerId);
    this.precise.addWorker(workerId);
  }

  override removeWorker(workerId: string): void {
    this.base.removeWorker(workerId);
    this.precise.removeWorker(workerId);
    this.sources.delete(workerId);
    this.chosenRanks.delete(workerId);
  }

  override prepare(
    request: PrepareRequest,
    workers: readonly { readonly id: string }[],
  ): Promise<void> | undefined {
    const { text, model, tokenizeInput } = request;
    if (tokenizeInput === undefined) return undefined;
    const live = workers.filter((w) => this.tokens.isLive(w.id)).map((w) => w.id);
    if (live.length === 0) return undefined;
    const known = this.tokens.cached(model, tokenizeInput);
    if (known !== undefined) {
      this.remember(
        text,
        model,
        known,
        totalOf(tokenizeInput, known),
        isBeforeMedia(tokenizeInput),
      );
      return undefined;
    }
    return this.awaitTokens(text, model, tokenizeInput, live);
  }

  private async awaitTokens(
    text: string,
    model: string | undefined,
    input: TokenizeInput,
    workerIds: readonly string[],
  ): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const budget = new Promise<"timeout">((resolve) => {
      timer = setTimeout(() => resolve("timeout"), this.options.tokenizeBudgetMs);
    });
    const tokens = this.tokens.tokenize(workerIds, model, input);
    const result = await Promise.race([tokens, budget]);
    clearTimeout(timer);
    if (result === "timeout") {
      // A known prefix routes precisely on what it covers (issue 20: at 60 ms per /tokenize call
      // every request with a new ending timed out and routed as a tie).
      const prefix = this.tokens.cachedPrefix?.(model, input);
      if (prefix !== undefined && prefix.tokens.length > 0) {
        this.options.onTokenizeMiss?.("prefix");
        this.remember(text, model, prefix.tokens, prefix.tokens.length / prefix.fraction);
      } else {
        this.options.onTokenizeMiss?.("timeout");
      }
      this.awaitLate(text, model, tokens);
    } else if (result === undefined) this.options.onTokenizeMiss?.("unavailable");
    else this.remember(text, model, result, totalOf(input, result), isBeforeMedia(input));
  }

  private awaitLate(
    text: string,
    model: string | undefined,
    tokens: Promise<readonly number[] | undefined>,
  ): void {
    const key = lateKey(text, model);
    if (this.late.has(key)) return; // another request with this text already waits for them
    this.late.set(key, new Set());
    if (this.late.size > MAX_PREPARED) this.late.delete(this.late.keys().next().value as string);
    void tokens.then((arrived) => {
      const workerIds = this.late.get(key);
      this.late.delete(key);
      if (arrived === undefined || arrived.length === 0 || workerIds === undefined) return;
      for (const id of workerIds) {
        // A data-parallel engine chose the rank itself: which one is not known.
        if (this.tokens.isLive(id) && (this.tokens.ranksOf?.(id) ?? 1) === 1)
          this.precise.speculate(id, this.keysFor(id, arrived, model).keys);
      }
    });
  }

  /** `total`: the input's tokens when `tokens` are only a prefix's (an estimate). */
  private remember(
    text: string,
    model: string | undefined,
    tokens: readonly number[],
    total = tokens.length,
    beforeMedia = false,
  ): void {
    const m = model ?? "";
    let byText = this.prepared.get(m);
    if (byText === undefined) {
      byText = new Map();
      this.prepared.set(m, byText);
    }
    if (byText.delete(text)) this.preparedCount--;
    byText.set(text, { tokens, total: Math.max(total, tokens.length), beforeMedia });
    this.preparedCount++;
    // Oldest first within each model; models themselves in order of first use.
    for (const [key, texts] of this.prepared) {
      if (this.preparedCount <= MAX_PREPARED) break;
      const oldest = texts.keys().next();
      if (!oldest.done) {
        texts.delete(oldest.value);
        this.preparedCount--;
      }
      if (texts.size === 0) this.prepared.delete(key);
    }
  }

  private tokensOf(text: string, model: string | undefined): Prepared | undefined {
    return this.prepared.get(model ?? "")?.get(text);
  }

  override match(
    text: string,
    model: string | undefined,
    workers: readonly { readonly id: string }[],
    out: number[],
  ): void {
    const prepared = this.tokensOf(text, model);
    const tokens = prepared?.tokens;
    const known = tokens !== undefined && tokens.length > 0;
    // The base index answers for workers without live events; when every worker has them, its
    // walk would only be overwritten.
    if (!known || !workers.every((w) => this.tokens.isLive(w.id))) {
      this.base.match(text, model, workers, out);
    }
    if (!known) {
      for (const w of workers) {
        this.sources.set(w.id, this.base.name);
        if (this.chosenRanks.size > 0) this.chosenRanks.delete(w.id);
      }
      return;
    }
    // A chat with media: what the approximate trees say of the workers, the larger answer wins.
    let approximate: number[] | undefined;
    if (prepared!.beforeMedia === true) {
      approximate = new Array<number>(workers.length).fill(0);
      this.base.match(text, model, workers, approximate);
    }
    // Workers with the same block size and adapter share one computation of the keys.
    const memo = new Map<string, number[]>();
    for (let i = 0; i < workers.length; i++) {
      const id = workers[i]!.id;
      if (!this.tokens.isLive(id)) {
        this.sources.set(id, this.base.name);
        if (this.chosenRanks.size > 0) this.chosenRanks.delete(id);
        continue;
      }
      const matchedTokens = this.matchRanks(id, tokens, model, memo);
      out[i] = charsFor(text, matchedTokens / prepared!.total);
      this.sources.set(id, PRECISE);
      if (approximate !== undefined && approximate[i]! > out[i]!) {
        out[i] = approximate[i]!;
        this.sources.set(id, this.base.name);
      }
    }
  }

  /** Tokens the worker holds: its best rank's, that rank remembered for `rankOf` / `insert`. */
  private matchRanks(
    id: string,
    tokens: readonly number[],
    model: string | undefined,
    memo: Map<string, number[]>,
  ): number {
    const ranks = this.tokens.ranksOf?.(id) ?? 1;
    const { rank: bestRankNow, held: best } = bestRank(
      ranks,
      (rank) => {
        const rankId = rankIndexId(id, rank);
        const { keys, blockSize } = this.keysFor(rankId, tokens, model, memo);
        return this.precise.matchBlocks(rankId, keys) * blockSize;
      },
      (rank) => this.tokens.rankLoad?.(id, rank) ?? 0,
    );
    if (ranks > 1) this.chosenRanks.set(id, bestRankNow);
    else if (this.chosenRanks.size > 0) this.chosenRanks.delete(id);
    return Math.max(0, best);
  }

  override rankOf(workerId: string): number | undefined {
    return this.chosenRanks.get(workerId);
  }

  override insert(workerId: string, model: string | undefined, text: string): void {
    this.base.insert(workerId, model, text);
    const tokens = this.tokensOf(text, model)?.tokens;
    if (tokens === undefined) {
      // The key copies the whole prompt: built only while some request waits for late tokens.
      if (this.late.size > 0) this.late.get(lateKey(text, model))?.add(workerId);
      return;
    }
    if (!this.tokens.isLive(workerId)) return;
    const rankId = rankIndexId(workerId, this.chosenRanks.get(workerId) ?? 0);
    this.precise.speculate(rankId, this.keysFor(rankId, tokens, model).keys);
  }

  override truncate(
    workerId: string,
    model: string | undefined,
    text: string,
    keep: number,
  ): number {
    const forgotten = this.base.truncate(workerId, model, text, keep);
    const prepared = this.tokensOf(text, model);
    const tokens = prepared?.tokens;
    // Not accepted before its tokens came: nothing to speculate when they come.
    if (tokens === undefined && keep < text.length && this.late.size > 0)
      this.late.get(lateKey(text, model))?.delete(workerId);
    if (tokens !== undefined && text.length > 0) {
      // Which rank the request went to is not kept: every rank's speculation past `keep` goes.
      const ranks = this.tokens.ranksOf?.(workerId) ?? 1;
      for (let rank = 0; rank < ranks; rank++) {
        const rankId = rankIndexId(workerId, rank);
        const { keys, blockSize } = this.keysFor(rankId, tokens, model);
        const keepBlocks = Math.floor(((keep / text.length) * prepared!.total) / blockSize);
        this.precise.withdraw(rankId, keys, keepBlocks);
      }
    }
    return forgotten;
  }

  override sourceOf(workerId: string): string {
    return this.sources.get(workerId) ?? this.base.name;
  }

  private keysFor(
    workerId: string,
    tokens: readonly number[],
    model: string | undefined,
    memo?: Map<string, number[]>,
  ) {
    const blockSize = this.precise.blockSizeOf(workerId) ?? this.options.defaultBlockSize;
    // The salt is the same for every worker: a request has one.
    const memoKey = `${blockSize}\u0000${this.precise.loraFor(workerId, model)}`;
    let keys = memo?.get(memoKey);
    if (keys === undefined) {
      keys = this.precise.keysFor(workerId, tokens, model, blockSize) ?? [];
      memo?.set(memoKey, keys);
    }
    return { keys, blockSize };
  }
}

/**
 * The request's tokens as far as `tokens` tell: theirs, or for the messages before a chat's first
 * media (LeadingMessages) their count over the share of the routing text they stand for, so a
 * full match of them matches that share of the text and no more.
 */
function totalOf(input: TokenizeInput, tokens: readonly number[]): number {
  return "leadingMessages" in input && input.share > 0
    ? tokens.length / input.share
    : tokens.length;
}

function isBeforeMedia(input: TokenizeInput): boolean {
  return "leadingMessages" in input;
}

function lateKey(text: string, model: string | undefined): string {
  return `${model ?? ""}\u0000${text}`;
}

/** The characters of `text` standing for a matched fraction of its tokens, at a code point boundary. */
export function charsFor(text: string, fraction: number): number {
  let chars = Math.floor(text.length * Math.min(1, Math.max(0, fraction)));
  if (chars > 0 && chars < text.length && isHigh(text.charCodeAt(chars - 1))) chars--;
  return chars;
}
