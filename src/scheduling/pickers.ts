import { type RandomSource, randomIndex } from "./options.js";
import { onAlive, type Pick, type Picker, type SchedulingContext } from "./plugin.js";
import { LeastLoaded, Rotation } from "./rotation.js";

/**
 * The highest weighted score (GIE max-score-picker). GIE shuffles before it sorts, so equal scores
 * land anywhere; here equal scores take turns (a rotated scan keeps the first of them), which is
 * deterministic and spreads ties as evenly.
 */
export class MaxScorePicker implements Picker {
  readonly type = "max-score-picker";
  readonly usesPrefixes = false;
  private readonly rotation = new Rotation();
  constructor(readonly name: string) {}

  pick(ctx: SchedulingContext, totals: Float64Array): Pick | -1 {
    return maxScore(ctx, totals, this.rotation);
  }
}

/** The shared scan: -1 when no candidate is alive. */
export function maxScore(ctx: SchedulingContext, totals: Float64Array, rotation: Rotation) {
  const n = ctx.candidates.length;
  if (n === 0) return -1;
  const start = rotation.next(n, ctx.request.replicaRank);
  const alive = ctx.alive;
  let best = -1;
  let bestScore = Number.NEGATIVE_INFINITY;
  let ties = 0;
  for (let k = 0; k < n; k++) {
    let i = start + k;
    if (i >= n) i -= n;
    if (alive[i] === 0) continue;
    const s = totals[i]!;
    if (s > bestScore) {
      best = i;
      bestScore = s;
      ties = 1;
    } else if (s === bestScore) {
      ties++;
    }
  }
  if (best < 0) return -1;
  return { index: best, branch: ties > 1 ? "max_score_tie" : "max_score" } as const;
}

/**
 * Draws a candidate with probability proportional to its weighted score (GIE / llm-d
 * weighted-random-picker); uniformly among the alive when every score is 0.
 */
export class WeightedRandomPicker implements Picker {
  readonly type = "weighted-random-picker";
  readonly usesPrefixes = false;
  constructor(
    readonly name: string,
    private readonly random: RandomSource,
  ) {}

  pick(ctx: SchedulingContext, totals: Float64Array): Pick | -1 {
    const n = ctx.candidates.length;
    const alive = ctx.alive;
    let sum = 0;
    let count = 0;
    for (let i = 0; i < n; i++) {
      if (alive[i] === 0) continue;
      sum += Math.max(0, totals[i]!);
      count++;
    }
    if (count === 0) return -1;
    return {
      index: draw(ctx, this.random, sum, (i) => Math.max(0, totals[i]!)),
      branch: "weighted_random",
    };
  }
}

/**
 * Softmax over the weighted scores at a temperature: p(i) ∝ exp((s_i − max) / T) (NVIDIA Dynamo's
 * softmax_sample, lib/llm/src/kv_router/scheduler.rs, over scores instead of negated costs; over
 * min-max scores of a cost it is the same distribution). T = 0 is the max-score picker; a higher
 * T spreads more.
 */
export class SoftmaxPicker implements Picker {
  readonly type = "softmax-picker";
  readonly usesPrefixes = false;
  private readonly rotation = new Rotation();
  constructor(
    readonly name: string,
    private readonly temperature: number,
    private readonly random: RandomSource,
  ) {}

  pick(ctx: SchedulingContext, totals: Float64Array): Pick | -1 {
    const best = maxScore(ctx, totals, this.rotation);
    if (best === -1 || this.temperature === 0) return best;
    const top = totals[best.index]!;
    const t = this.temperature;
    const n = ctx.candidates.length;
    let sum = 0;
    for (let i = 0; i < n; i++) if (ctx.alive[i] === 1) sum += Math.exp((totals[i]! - top) / t);
    return {
      index: draw(ctx, this.random, sum, (i) => Math.exp((totals[i]! - top) / t)),
      branch: "softmax",
    };
  }
}

/** One draw among the alive candidates with weights `weight(i)` summing to `sum`. */
function draw(
  ctx: SchedulingContext,
  random: RandomSource,
  sum: number,
  weight: (i: number) => number,
): number {
  const n = ctx.candidates.length;
  const alive = ctx.alive;
  let last = -1;
  let count = 0;
  for (let i = 0; i < n; i++) if (alive[i] === 1) count++;
  if (!(sum > 0)) {
    // Every weight 0: uniform among the alive.
    let k = Math.min(count - 1, Math.floor(Math.max(0, random()) * count));
    for (let i = 0; i < n; i++) {
      if (alive[i] === 0) continue;
      if (k-- === 0) return i;
      last = i;
    }
    return last;
  }
  let r = Math.max(0, random()) * sum;
  for (let i = 0; i < n; i++) {
    if (alive[i] === 0) continue;
    last = i;
    const w = weight(i);
    if (r < w) return i;
    r -= w;
  }
  // Rounding (or a source returning 1): the last alive candidate.
  return last;
}

/** The router's load-only rules (--policy round_robin, random, power_of_two, least_load). */
export type LoadRule = "round_robin" | "random" | "power_of_two" | "least_load";

/**
 * The router's load-only policies as one picker: each rule reads only the candidates' in-flight
 * counts, never the scores or prefixes, and the branch it reports is its name.
 * - round_robin: each call takes the next candidate in turn;
 * - random: a uniformly random candidate;
 * - power_of_two: two distinct random candidates, the one with fewer in-flight requests wins (on a
 *   tie, the first drawn, itself random);
 * - least_load: the fewest in-flight requests; equal loads take turns.
 */
export class LoadPicker implements Picker {
  readonly type: `${string}-picker`;
  readonly usesPrefixes = false;
  /** round_robin's turn and least_load's rotated scan (see rotation.ts). */
  private readonly rotation = new Rotation();
  private readonly loads = new LeastLoaded();
  constructor(
    readonly name: string,
    private readonly rule: LoadRule,
    private readonly random: RandomSource,
  ) {
    this.type = `${rule.replaceAll("_", "-")}-picker`;
  }

  pick(ctx: SchedulingContext): Pick | -1 {
    return onAlive(ctx, this.choose);
  }

  private readonly choose = ({ candidates, request }: SchedulingContext): Pick => {
    const n = candidates.length;
    const branch = this.rule;
    const rank = request.replicaRank;
    switch (branch) {
      case "round_robin":
        return { index: this.rotation.next(n, rank), branch };
      case "random":
        return { index: randomIndex(this.random, n), branch };
      case "least_load":
        return { index: this.loads.scan(candidates, rank), branch };
      case "power_of_two": {
        if (n === 1) return { index: 0, branch };
        const first = randomIndex(this.random, n);
        // Draw from the n - 1 others and skip over `first`: distinct without retrying.
        let second = randomIndex(this.random, n - 1);
        if (second >= first) second++;
        const index = candidates[second]!.inFlight < candidates[first]!.inFlight ? second : first;
        return { index, branch };
      }
    }
  };
}
