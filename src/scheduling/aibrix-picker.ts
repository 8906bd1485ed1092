import { matchedOf, type Pick, type Picker, type SchedulingContext } from "./plugin.js";
import { LeastLoaded, Rotation } from "./rotation.js";

export interface AibrixOptions {
  /** AIBRIX_PREFIX_CACHE_POD_RUNNING_REQUEST_IMBALANCE_ABS_COUNT: max − min running above this = imbalanced. */
  readonly imbalanceAbsCount: number;
  /** AIBRIX_PREFIX_CACHE_STANDARD_DEVIATION_FACTOR: k in mean + k·σ. */
  readonly stdDevFactor: number;
  /** AIBRIX_PREFIX_CACHE_BLOCK_SIZE with the character tokenizer: characters per block. */
  readonly blockChars: number;
}

/**
 * AIBrix's prefix-cache router (vllm-project/aibrix pkg/plugins/gateway/algorithms/prefix_cache.go;
 * docs "Routing Algorithms / Prefix Cache Aware", the seed document 000), over the candidates'
 * router-tracked running requests (in flight) and the prefix index's matches:
 *
 * 1. Imbalance: max − min running > imbalanceAbsCount (code default 8) → the least running.
 * 2. Otherwise the pods matching at least one whole block, ordered by match% (matched blocks over
 *    the prompt's whole blocks; the partial tail block is not hashed) descending, then running
 *    ascending; the first whose running count is < mean + k·σ of all candidates (k = 1, the
 *    code's default; the readme says 2) takes the request.
 * 3. Otherwise (no match, or every matching pod over the bound) the least running.
 * AIBrix shuffles the matching pods before its stable sort; equal keys here take turns instead.
 * Least running breaks ties in rotation (scheduling/rotation.ts).
 */
export class AibrixPrefixPicker implements Picker {
  readonly type = "aibrix-prefix-picker";
  readonly usesPrefixes = true;
  private readonly loads = new LeastLoaded();
  private readonly rotation = new Rotation();
  constructor(
    readonly name: string,
    private readonly options: AibrixOptions,
  ) {}

  pick(ctx: SchedulingContext, _totals: Float64Array): Pick | -1 {
    const { candidates, alive } = ctx;
    const n = candidates.length;
    let count = 0;
    let min = Number.POSITIVE_INFINITY;
    let max = Number.NEGATIVE_INFINITY;
    let sum = 0;
    for (let i = 0; i < n; i++) {
      if (alive[i] === 0) continue;
      const r = candidates[i]!.inFlight;
      count++;
      sum += r;
      if (r < min) min = r;
      if (r > max) max = r;
    }
    if (count === 0) return -1;
    if (max - min > this.options.imbalanceAbsCount) {
      return { index: this.leastRunning(ctx), branch: "imbalanced" };
    }
    const mean = sum / count;
    let squares = 0;
    for (let i = 0; i < n; i++) {
      if (alive[i] === 1) squares += (candidates[i]!.inFlight - mean) ** 2;
    }
    const bound = mean + this.options.stdDevFactor * Math.sqrt(squares / count);
    const b = this.options.blockChars;
    const blocks = Math.floor(ctx.length / b);
    if (blocks > 0) {
      // The best (match%, −running) pod under the bound, scanned from a rotated start.
      const start = this.rotation.next(n, ctx.request.replicaRank);
      let best = -1;
      let bestBlocks = 0;
      let bestRunning = 0;
      for (let k = 0; k < n; k++) {
        let i = start + k;
        if (i >= n) i -= n;
        if (alive[i] === 0) continue;
        const matched = Math.min(blocks, Math.floor(matchedOf(ctx, i) / b));
        const running = candidates[i]!.inFlight;
        if (matched === 0 || !(running < bound)) continue;
        if (matched > bestBlocks || (matched === bestBlocks && running < bestRunning)) {
          best = i;
          bestBlocks = matched;
          bestRunning = running;
        }
      }
      if (best >= 0) return { index: best, branch: "prefix_match" };
    }
    return { index: this.leastRunning(ctx), branch: "least_request" };
  }

  /** The alive candidate with the fewest running requests; ties take turns. */
  private leastRunning(ctx: SchedulingContext): number {
    const { candidates, alive } = ctx;
    if (!alive.subarray(0, candidates.length).includes(0))
      return this.loads.scan(candidates, ctx.request.replicaRank);
    const n = candidates.length;
    const start = this.rotation.next(n, ctx.request.replicaRank);
    let best = -1;
    for (let k = 0; k < n; k++) {
      let i = start + k;
      if (i >= n) i -= n;
      if (alive[i] === 1 && (best < 0 || candidates[i]!.inFlight < candidates[best]!.inFlight)) {
        best = i;
      }
    }
    return best;
  }
}
