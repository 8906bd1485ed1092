import {
  type Filter,
  matchedOf,
  type Picker,
  type SchedulingContext,
  type SchedulingWorker,
  type Scorer,
} from "./plugin.js";
import type {
  CandidateExplanation,
  Policy,
  PolicyWorker,
  ProfileExplanation,
  RouteDecision,
  RouteRequest,
} from "./policy.js";

export interface WeightedScorer {
  readonly scorer: Scorer;
  readonly weight: number;
}

export interface ProfileParts {
  readonly filters: readonly Filter[];
  readonly scorers: readonly WeightedScorer[];
  readonly picker: Picker;
}

/** How a profile is shown and which index it reads, beside its plugins. */
export interface ProfileOptions {
  /** The index the profile is defined over, when not --prefix-index's (Policy.prefixIndex). */
  readonly prefixIndex?: { readonly name: "block_hash"; readonly blockChars: number } | undefined;
  /** False: x-radixgate-route does not name it (Policy.labelsRoute). */
  readonly labelsRoute?: boolean | undefined;
}

/**
 * A scheduling profile: filters → weighted scorers → picker, the one thing every --policy and
 * --scheduler-config runs: the scheduler (scheduling/scheduler.ts) calls one synchronous
 * `select` after the prefix index's `prepare`, with the matched lengths when any plugin reads
 * prefixes.
 *
 * Session affinity, written once here: a profile with a session-affinity-scorer weighs the
 * conversation's worker against the rest; any other keeps the conversation on its worker while
 * that worker is a candidate ("session" branch), before its filters, as the router always did.
 *
 * Allocation-free per decision apart from the picker's answer: the context and the score arrays
 * are reused (grown when a larger fleet comes). Nothing keeps a worker between decisions: the
 * context's candidates are dropped at the end of each call.
 */
export class SchedulerProfile implements Policy {
  readonly usesPrefixes: boolean;
  readonly handlesSessions: boolean;
  readonly labelsRoute: boolean;
  readonly prefixIndex: ProfileOptions["prefixIndex"];
  /** The picker's per-worker cost, when it picks by one (Policy.cost). */
  readonly cost?: (
    worker: PolicyWorker,
    matched: number,
    length: number,
    now: number,
    fill?: number,
  ) => number;
  private readonly ctx: SchedulingContext;
  private scratch = new Float64Array(16);
  private totals = new Float64Array(16);

  constructor(
    readonly name: string,
    readonly parts: ProfileParts,
    readonly options: ProfileOptions = {},
  ) {
    this.prefixIndex = options.prefixIndex;
    this.labelsRoute = options.labelsRoute ?? true;
    this.usesPrefixes =
      parts.picker.usesPrefixes || parts.scorers.some(({ scorer }) => scorer.usesPrefixes);
    this.handlesSessions = parts.scorers.some(
      ({ scorer }) => scorer.type === "session-affinity-scorer",
    );
    const picker = parts.picker;
    if (picker.cost !== undefined) {
      this.cost = (worker, matched, length, now, fill) =>
        picker.cost!(worker, matched, length, now, fill);
    }
    this.ctx = {
      candidates: NO_CANDIDATES,
      request: { text: "" },
      now: 0,
      length: 0,
      alive: new Uint8Array(16),
    };
  }

  /** The same plugins, shown or indexed otherwise. */
  with(options: ProfileOptions): SchedulerProfile {
    return new SchedulerProfile(this.name, this.parts, { ...this.options, ...options });
  }

  /** The picker's name (for /debug/route). */
  get pickerName(): string {
    return this.parts.picker.name;
  }

  select<W extends PolicyWorker>(
    candidates: readonly W[],
    request: RouteRequest,
  ): RouteDecision<W> | undefined {
    const n = candidates.length;
    if (n === 0) return undefined;
    const session = request.sessionWorker;
    if (session !== undefined && !this.handlesSessions) {
      const pinned = sessionPin(candidates, request, session);
      if (pinned !== undefined) return pinned;
    }
    const ctx = this.begin(candidates, request);
    try {
      this.filter(ctx, null);
      const totals = this.score(ctx, null);
      const pick = this.parts.picker.pick(ctx, totals);
      if (pick === -1) return undefined;
      const worker = candidates[pick.index]!;
      const matchRate = this.usesPrefixes
        ? ctx.length === 0
          ? 0
          : matchedOf(ctx, pick.index) / ctx.length
        : null;
      return { worker, branch: pick.branch, matchRate };
    } finally {
      ctx.candidates = NO_CANDIDATES;
      ctx.request = EMPTY;
    }
  }

  /** Whether the last select's filters removed candidates[i] (the alive flags stay until the next). */
  filteredOut(i: number): boolean {
    return this.ctx.alive[i] === 0;
  }

  explain(candidates: readonly PolicyWorker[], request: RouteRequest): ProfileExplanation {
    const ctx = this.begin(candidates, request);
    try {
      const filteredBy: (string | null)[] = candidates.map(() => null);
      const failedOpen = this.filter(ctx, filteredBy);
      const scores: Record<string, { score: number; weight: number }>[] = candidates.map(
        () => ({}),
      );
      const totals = this.score(ctx, scores);
      const out: CandidateExplanation[] = candidates.map((_, i) => ({
        filteredBy: filteredBy[i] ?? null,
        scores: ctx.alive[i] === 1 ? scores[i]! : {},
        total: ctx.alive[i] === 1 ? totals[i]! : null,
      }));
      return { profile: this.name, picker: this.parts.picker.name, failedOpen, candidates: out };
    } finally {
      ctx.candidates = NO_CANDIDATES;
      ctx.request = EMPTY;
    }
  }

  private begin(candidates: readonly SchedulingWorker[], request: RouteRequest): SchedulingContext {
    const n = candidates.length;
    if (this.totals.length < n) {
      const size = Math.max(n, this.totals.length * 2);
      this.totals = new Float64Array(size);
      this.scratch = new Float64Array(size);
      this.ctx.alive = new Uint8Array(size);
    }
    const ctx = this.ctx;
    ctx.candidates = candidates;
    ctx.request = request;
    ctx.now = Date.now();
    ctx.length = request.text.length;
    ctx.alive.fill(1, 0, n);
    return ctx;
  }

  /**
   * Runs the filters in order; records who removed whom; returns the filters undone (fail-open).
   * Indexed loops and no array unless one failed open: this runs for every request.
   */
  private filter(ctx: SchedulingContext, removedBy: (string | null)[] | null): readonly string[] {
    let failedOpen: string[] | undefined;
    const { candidates, alive } = ctx;
    const n = candidates.length;
    // The filter's verdicts first (into scratch, free until scoring), so that a fail-open filter
    // can be undone before it removed anyone.
    const admits = this.scratch;
    const filters = this.parts.filters;
    for (let f = 0; f < filters.length; f++) {
      const filter = filters[f]!;
      let left = 0;
      for (let i = 0; i < n; i++) {
        const ok = alive[i] === 1 && filter.admits(candidates[i]!, ctx);
        admits[i] = ok ? 1 : 0;
        if (ok) left++;
      }
      if (left === 0 && filter.failOpen) {
        if (failedOpen === undefined) failedOpen = [];
        failedOpen.push(filter.name);
        continue;
      }
      for (let i = 0; i < n; i++) {
        if (alive[i] === 1 && admits[i] === 0) {
          alive[i] = 0;
          if (removedBy !== null) removedBy[i] = filter.name;
        }
      }
    }
    return failedOpen ?? NONE_FAILED;
  }

  /** The weighted sum of every scorer's scores (into this.totals); per-scorer detail when asked. */
  private score(
    ctx: SchedulingContext,
    detail: Record<string, { score: number; weight: number }>[] | null,
  ): Float64Array {
    const n = ctx.candidates.length;
    const totals = this.totals;
    const scratch = this.scratch;
    totals.fill(0, 0, n);
    const scorers = this.parts.scorers;
    for (let k = 0; k < scorers.length; k++) {
      const { scorer, weight } = scorers[k]!;
      scorer.score(ctx, scratch);
      for (let i = 0; i < n; i++) {
        // Clamped: a score outside [0, 1] (a bug, a NaN) must not outweigh the others.
        const s = scratch[i]!;
        const score = s >= 0 ? (s <= 1 ? s : 1) : 0;
        totals[i] = totals[i]! + weight * score;
        if (detail !== null) detail[i]![scorer.name] = { score, weight };
      }
    }
    return totals;
  }
}

/**
 * The conversation's worker while it is a candidate (healthy, breaker closed, not tried yet for
 * this request); its prefix match is still reported, and inserted by the scheduler.
 */
function sessionPin<W extends PolicyWorker>(
  candidates: readonly W[],
  request: RouteRequest,
  session: string,
): RouteDecision<W> | undefined {
  const i = candidates.findIndex((c) => c.id === session);
  if (i < 0) return undefined;
  const matched = request.matched;
  const matchRate = matched === undefined ? null : (matched[i] ?? 0) / request.text.length;
  return { worker: candidates[i]!, branch: "session", matchRate };
}

const EMPTY: RouteRequest = { text: "" };
const NONE_FAILED: readonly string[] = Object.freeze([]);
const NO_CANDIDATES: readonly SchedulingWorker[] = Object.freeze([]);
