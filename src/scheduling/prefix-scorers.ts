import { invertMinMax, matchedOf, type SchedulingContext, type Scorer } from "./plugin.js";
import { queuedPrefillChars } from "./policy.js";
import { claimedWork, placementFill, prefillWork } from "./prefix-cost.js";

/**
 * Share of the prompt the worker probably holds, from whatever PrefixIndex the router runs
 * (approximate trees, shared, precise, hybrid, block hashes). GIE's prefix-cache-scorer
 * (pkg/epp/framework/plugins/scheduling/scorer/prefix) scores matched blocks / prompt blocks; with
 * `blockChars` > 0 the characters are counted the same way, whole blocks matched over the prompt's
 * whole blocks (the partial tail block is not hashed, as in index/block-hash-index.ts), with 0 in
 * characters. A whole match scores 1.
 */
export class PrefixScorer implements Scorer {
  readonly type = "prefix-cache-scorer";
  readonly usesPrefixes = true;
  constructor(
    readonly name: string,
    private readonly blockChars: number,
  ) {}

  score(ctx: SchedulingContext, out: Float64Array): void {
    const n = ctx.candidates.length;
    const length = ctx.length;
    const b = this.blockChars;
    const blocks = b > 0 ? Math.floor(length / b) : length;
    for (let i = 0; i < n; i++) {
      const m = matchedOf(ctx, i);
      if (length === 0) out[i] = 0;
      else if (m === length || b <= 0) out[i] = m / length;
      else out[i] = blocks === 0 ? 0 : Math.min(1, Math.floor(m / b) / blocks);
    }
  }
}

export interface PrefillWorkOptions {
  /** Weight of the uncached characters already queued on the worker. */
  readonly queueWeight: number;
  /** Characters of prefill each in-flight request counts for. */
  readonly requestChars: number;
  /** prefix_cost's eviction weight (times each candidate's fill); default 0. */
  readonly evictionWeight?: number;
}

/**
 * prefix_cost's estimate of the prefill work ahead of this request's first token (prefillWork in
 * prefix-cost.ts), as a score: the least work scores 1, the most 0 (min-max).
 */
export class PrefillWorkScorer implements Scorer {
  readonly type = "prefill-work-scorer";
  readonly usesPrefixes = true;
  constructor(
    readonly name: string,
    private readonly options: PrefillWorkOptions,
  ) {}

  score(ctx: SchedulingContext, out: Float64Array): void {
    const { candidates, now, length } = ctx;
    const { queueWeight, requestChars, evictionWeight = 0 } = this.options;
    const fill = placementFill(ctx.request.fill, ctx.request.matched, candidates.length);
    for (let i = 0; i < candidates.length; i++) {
      out[i] =
        prefillWork(
          candidates[i]!,
          matchedOf(ctx, i),
          length,
          now,
          queueWeight,
          requestChars,
          evictionWeight * (fill?.[i] ?? 0),
          ctx.request.priority,
        ) + claimedWork(ctx.request, i, queueWeight, requestChars);
    }
    invertMinMax(ctx, out);
  }
}

export interface DynamoCostOptions {
  /** kv_overlap_score_weight: weight of the blocks to prefill (Dynamo default 1.0). */
  readonly overlapScoreWeight: number;
  /** Characters per KV block (Dynamo takes the engine's block size; 16 tokens ≈ 64 characters). */
  readonly blockChars: number;
}

/**
 * NVIDIA Dynamo's KV router cost (ai-dynamo/dynamo lib/llm/src/kv_router/scheduler.rs,
 * DefaultWorkerSelector::select_worker; docs/router/kv_cache_routing.md "Cost Calculation"):
 *
 *   logit = overlap_score_weight × prefill blocks + active blocks      (lower is better)
 *
 * prefill blocks = the worker's prefill still in progress (Worker.pendingPrefillChars) plus this
 * request's uncached characters, over the block size; active blocks = the characters of its
 * in-flight sequences (Worker.activeChars, the router's own tracking, as Dynamo's) plus this
 * request's blocks the worker does not hold yet (Dynamo's potential blocks add only the request's
 * blocks missing from the worker's active set), over the block size. Dynamo counts a block shared
 * by several active sequences once; activeChars counts it per sequence, so a worker running many
 * requests on one prefix looks busier here than to Dynamo. The score is the logit min-max inverted: the cheapest worker 1,
 * the dearest 0. A softmax over these scores at temperature T is exactly Dynamo's softmax_sample
 * (it divides the negated logits by max − min, then by T); T = 0 picks the lowest cost.
 */
export class DynamoCostScorer implements Scorer {
  readonly type = "dynamo-cost-scorer";
  readonly usesPrefixes = true;
  constructor(
    readonly name: string,
    private readonly options: DynamoCostOptions,
  ) {}

  /** The logit for one worker (shown by POST /debug/route through the score). */
  logit(pending: number, active: number, length: number, matched: number): number {
    const b = this.options.blockChars;
    const prefill = (Math.max(0, pending) + length - matched) / b;
    return this.options.overlapScoreWeight * prefill + (Math.max(0, active) + length - matched) / b;
  }

  score(ctx: SchedulingContext, out: Float64Array): void {
    const { candidates, length } = ctx;
    for (let i = 0; i < candidates.length; i++) {
      const w = candidates[i]!;
      out[i] = this.logit(queuedPrefillChars(w), w.activeChars ?? 0, length, matchedOf(ctx, i));
    }
    invertMinMax(ctx, out);
  }
}
