import type { LoadSignals } from "../workers/signals.js";
import type { RandomSource } from "./options.js";
import type { PolicyWorker, RouteBranch, RouteRequest } from "./policy.js";

/**
 * The scheduling pipeline's stages (filters → scorers → picker), in the shape of the Gateway API
 * Inference Extension's scheduler (kubernetes-sigs/gateway-api-inference-extension,
 * pkg/epp/scheduling: a profile's filters drop endpoints, its scorers give each a score in [0, 1]
 * summed by weight, its picker chooses). One synchronous pass per decision; plugins keep no
 * reference to a worker between decisions.
 */

/**
 * What the pipeline reads of a worker, beyond what every policy sees. All optional: a worker that
 * does not expose a signal gets the plugin's neutral answer (a src/workers/worker.ts Worker has
 * them all).
 */
export interface SchedulingWorker extends PolicyWorker {
  /** Healthy, not removed, not cooling down, breaker admits (Worker.available). */
  readonly available?: boolean;
  /** Models and adapters it lists on /v1/models; undefined = not known. */
  readonly servedModels?: ReadonlySet<string> | undefined;
  /** What its engine last reported (queue, running, KV usage), when fresh at `now`. */
  readonly signals?: { load(now: number): LoadSignals | undefined };
  /** Characters of routing text of its in-flight requests (the router's own count). */
  readonly activeChars?: number;
  /** Whether its engine holds the LoRA adapter loaded now; undefined = not known. */
  loraResident?(adapter: string, now: number): boolean | undefined;
  /** The router sent it a request for the adapter (its record of what the engine loaded). */
  loraRouted?(adapter: string): void;
}

/** One decision's inputs, shared by every plugin of a profile (one object, reused). */
export interface SchedulingContext {
  candidates: readonly SchedulingWorker[];
  request: RouteRequest;
  /** Epoch ms, read once per decision: every signal is judged against the same instant. */
  now: number;
  /** Text length (characters). */
  length: number;
  /** alive[i] = 1 while candidate i passes every filter so far. */
  alive: Uint8Array;
}

export interface Filter {
  readonly type: string;
  readonly name: string;
  /**
   * True when removing every candidate would be worse than keeping them all: the profile then
   * undoes this filter for the decision (GIE's saturation filter fails open).
   */
  readonly failOpen: boolean;
  admits(worker: SchedulingWorker, ctx: SchedulingContext): boolean;
}

export interface Scorer {
  readonly type: string;
  readonly name: string;
  /** Reads the prefix index's matched lengths (the decider then matches and inserts the text). */
  readonly usesPrefixes: boolean;
  /** out[i] ∈ [0, 1] for every alive candidate i (higher is better); others are ignored. */
  score(ctx: SchedulingContext, out: Float64Array): void;
}

export interface Pick {
  readonly index: number;
  /** The picker's outcome: the decision's branch (metrics, x-radixgate-route). */
  readonly branch: RouteBranch;
}

export interface Picker {
  readonly type: string;
  readonly name: string;
  /** Reads the matched lengths itself (AIBrix's picker). */
  readonly usesPrefixes: boolean;
  /**
   * One of the alive candidates (by index), from their weighted scores `totals`; -1 when none is
   * alive.
   */
  pick(ctx: SchedulingContext, totals: Float64Array): Pick | -1;
  /**
   * For a picker that takes the lowest of a per-worker cost (prefix-cost-picker): that cost, for
   * one worker holding `matched` characters of a `length`-character text at `now`, its cache
   * `fill` full (Policy.cost).
   */
  cost?(worker: PolicyWorker, matched: number, length: number, now: number, fill?: number): number;
}

export type Plugin = Filter | Scorer | Picker;
export type PluginKind = "filter" | "scorer" | "picker";

/** What a plugin's factory gets besides its parameters. */
export interface PluginEnv {
  readonly random: RandomSource;
}

/**
 * Runs a rule written over every candidate (the router's own policies as pickers) on the alive
 * ones only: as it is when no filter removed anyone (nothing copied), else over a compacted view
 * whose pick is mapped back. -1 when none is alive.
 */
export function onAlive(
  ctx: SchedulingContext,
  rule: (ctx: SchedulingContext) => Pick | -1,
): Pick | -1 {
  const n = ctx.candidates.length;
  const alive = ctx.alive;
  let left = 0;
  for (let i = 0; i < n; i++) left += alive[i]!;
  if (left === n) return rule(ctx);
  if (left === 0) return -1;
  const at: number[] = [];
  const candidates: SchedulingWorker[] = [];
  const all = ctx.request.matched;
  const matched: number[] | undefined = all === undefined ? undefined : [];
  for (let i = 0; i < n; i++) {
    if (alive[i] === 0) continue;
    at.push(i);
    candidates.push(ctx.candidates[i]!);
    matched?.push(all![i] ?? 0);
  }
  const pick = rule({
    candidates,
    request: { ...ctx.request, matched },
    now: ctx.now,
    length: ctx.length,
    alive: new Uint8Array(left).fill(1),
  });
  return pick === -1 ? -1 : { index: at[pick.index]!, branch: pick.branch };
}

/** matched[i] clamped to [0, length]: an index may claim more than the text. */
export function matchedOf(ctx: SchedulingContext, i: number): number {
  if (ctx.length === 0) return 0;
  const m = ctx.request.matched?.[i] ?? 0;
  return m <= 0 ? 0 : m >= ctx.length ? ctx.length : m;
}

/**
 * Min-max normalisation, lower raw value = better (GIE's queue-scorer,
 * pkg/epp/scheduling/plugins/scorer/queue.go): (max − v) / (max − min) over the alive candidates,
 * 1 for all when they are equal. `raw` holds the values on entry and the scores on return.
 */
export function invertMinMax(ctx: SchedulingContext, raw: Float64Array): void {
  const n = ctx.candidates.length;
  const alive = ctx.alive;
  let min = Number.POSITIVE_INFINITY;
  let max = Number.NEGATIVE_INFINITY;
  for (let i = 0; i < n; i++) {
    if (alive[i] === 0) continue;
    const v = raw[i]!;
    if (v < min) min = v;
    if (v > max) max = v;
  }
  const span = max - min;
  for (let i = 0; i < n; i++) raw[i] = span > 0 ? (max - raw[i]!) / span : 1;
}
