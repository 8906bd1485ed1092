/**
 * bench:routing --diagnose: where the hit rate a row misses goes. At every routing decision the
 * simulated workers (hosted in this process) say how many of the request's prompt tokens each one
 * holds right now; the router's prefix index says what it believes. A decision that sends the
 * request to a worker holding fewer tokens than the best holder loses the difference, counted as:
 *
 * - `tokenize_miss`: the index answered for the best holder from the approximate trees (no tokens
 *   in time, or its event stream not live): precise matching was not in play;
 * - `index_miss`: the precise index did not credit the best holder with more than the chosen
 *   worker (events late, speculative entries expired or wrong, block alignment of the tail);
 * - `policy:<branch>`: the index did credit the best holder with more, and the policy chose
 *   another worker (balance gate, load bound, cost).
 *
 * A debug tally, not a measurement of its own: "now" is the decision, before the request waits in
 * the engine's queue, so a worker that is still prefilling the same prefix counts as not holding
 * it. The router is reached through a private field, as no production path needs this hook.
 */

import type { SimWorker } from "../../sim/worker.js";
import { PRECISE } from "../../src/index/hybrid-index.js";
import type { TokenizeInput } from "../../src/index/tokenize-input.js";
import type { PolicyWorker } from "../../src/scheduling/policy.js";
import type { Scheduler } from "../../src/scheduling/scheduler.js";
import type { RunningRouter } from "../../src/server.js";
import type { Worker } from "../../src/workers/worker.js";
import { hookDecisions } from "./decision-hook.js";

export interface LossCount {
  decisions: number;
  /** Prompt tokens the best holder had and the chosen worker did not. */
  tokens: number;
}

export interface RoutingDiagnosis {
  decisions: number;
  /** Prompt tokens of every diagnosed decision (the denominator of the lost points). */
  promptTokens: number;
  /** Decisions where the chosen worker held as much as any worker. */
  bestHolderChosen: number;
  /** Decisions whose index answer for the chosen worker came from the precise index. */
  preciseSource: number;
  /** Losses by cause (see the module comment). */
  lost: Record<string, LossCount>;
  /**
   * Decisions where no worker held any of the prompt and the index credited none either: the
   * first of a prefix, or a prefix whose earlier requests the index lost track of.
   */
  coldDecisions: number;
  /** Distinct leading prefixes (first HOME_PREFIX_TOKENS tokens) and the workers each was sent to. */
  prefixes: number;
  prefixHomes: number;
}

/** Tokens that name a prompt's "prefix" for the homes count (a system prompt's start). */
const HOME_PREFIX_TOKENS = 64;

export function emptyDiagnosis(): RoutingDiagnosis {
  return {
    decisions: 0,
    promptTokens: 0,
    bestHolderChosen: 0,
    preciseSource: 0,
    lost: {},
    coldDecisions: 0,
    prefixes: 0,
    prefixHomes: 0,
  };
}

/** Starts tallying the router's decisions against the workers' caches into `tally` (returned). */
export function diagnoseDecisions(
  router: RunningRouter,
  sims: readonly SimWorker[],
  tally: RoutingDiagnosis = emptyDiagnosis(),
): RoutingDiagnosis {
  let index: Scheduler["index"] | undefined;
  // Worker id → its simulator, built once and kept as the registry changes.
  const simByUrl = new Map(sims.map((s) => [s.url, s]));
  const simOf = new Map<string, SimWorker>();
  const track = (worker: Worker) => {
    const sim = simByUrl.get(worker.url);
    if (sim !== undefined) simOf.set(worker.id, sim);
  };
  const registry = router.context.registry;
  for (const worker of registry.list()) track(worker);
  registry.onChange((event, worker) => {
    if (event === "added") track(worker);
    else simOf.delete(worker.id);
  });
  type Decided = ReturnType<Scheduler["decide"]>;
  // Both ways in: decide, and decideAgreed (the forwarder's first attempt; with shared state it may
  // wait for the replicas to agree). What each worker holds is read before the decision inserts.
  const measure = (
    candidates: readonly PolicyWorker[],
    request: Parameters<Scheduler["decide"]>[1],
    decide: () => Decided | Promise<Decided>,
  ): Decided | Promise<Decided> => {
    const tokens = promptTokens(sims[0], request.tokenizeInput);
    const text = request.text;
    if (tokens === undefined || text.length === 0 || candidates.length < 2) return decide();
    const matched: number[] = new Array(candidates.length).fill(0);
    index?.match(text, request.model, candidates, matched);
    const sources = candidates.map((c) => index?.sourceOf?.(c.id) ?? index?.name ?? "");
    const held = candidates.map((c) => simOf.get(c.id)?.cachedPrefixTokens(tokens) ?? 0);
    const count = (decision: Decided): Decided => {
      if (decision !== undefined) tallyOne(candidates, decision, tokens, matched, sources, held);
      return decision;
    };
    const out = decide();
    return out instanceof Promise ? out.then(count) : count(out);
  };
  const tallyOne = (
    candidates: readonly PolicyWorker[],
    decision: NonNullable<Decided>,
    tokens: readonly number[],
    matched: readonly number[],
    sources: readonly string[],
    held: readonly number[],
  ): void => {
    const chosen = candidates.indexOf(decision.worker);
    let best = chosen;
    for (let i = 0; i < held.length; i++) if (held[i]! > held[best]!) best = i;
    tally.decisions++;
    tally.promptTokens += tokens.length;
    if (tokens.length >= HOME_PREFIX_TOKENS) {
      const key = tokens.slice(0, HOME_PREFIX_TOKENS).join(",");
      let set = homes.get(key);
      if (set === undefined) {
        set = new Set();
        homes.set(key, set);
        tally.prefixes++;
      }
      if (!set.has(decision.worker.id)) {
        set.add(decision.worker.id);
        tally.prefixHomes++;
      }
    }
    if (held.every((h) => h === 0) && matched.every((m) => m === 0)) tally.coldDecisions++;
    if (sources[chosen] === PRECISE) tally.preciseSource++;
    if (best === chosen) {
      tally.bestHolderChosen++;
      return;
    }
    const cause =
      sources[best] !== PRECISE
        ? "tokenize_miss"
        : matched[best]! > matched[chosen]!
          ? `policy:${decision.branch}`
          : "index_miss";
    const entry = tally.lost[cause] ?? { decisions: 0, tokens: 0 };
    tally.lost[cause] = entry;
    entry.decisions++;
    entry.tokens += held[best]! - held[chosen]!;
  };
  const homes = new Map<string, Set<string>>();
  index = hookDecisions(router, measure).index;
  return tally;
}

/**
 * The prompt tokens the simulated engine prefills for the request: what its /tokenize answers,
 * with its own tokenizer (the stand-in, or a tokenizer.json). Every simulator of a bench fleet
 * has the same options (fleet.ts: fleetWorkerOptions), so one of them answers for all.
 */
function promptTokens(
  sim: SimWorker | undefined,
  input: TokenizeInput | undefined,
): readonly number[] | undefined {
  if (input === undefined) return undefined;
  if ("tokens" in input) return input.tokens;
  return sim?.tokenizeBody(input);
}

/** Report lines: lost points of hit rate by cause. */
export function diagnosisLines(row: string, d: RoutingDiagnosis): string[] {
  if (d.decisions === 0) return [];
  const pts = (tokens: number) => ((100 * tokens) / Math.max(1, d.promptTokens)).toFixed(1);
  const lines = [
    `  ${row}: ${d.decisions} routed decisions, best holder chosen in ${d.bestHolderChosen}, ` +
      `precise index answered for the chosen worker in ${d.preciseSource}, ${d.coldDecisions} cold ` +
      `(nothing held, nothing credited); ${d.prefixes} prefixes sent to ${(d.prefixHomes / Math.max(1, d.prefixes)).toFixed(2)} workers each`,
  ];
  const causes = Object.entries(d.lost).sort((a, b) => b[1].tokens - a[1].tokens);
  for (const [cause, c] of causes) {
    lines.push(
      `    lost to ${cause}: ${c.decisions} decisions, ${c.tokens} tokens (${pts(c.tokens)} points of the routed requests' hit rate)`,
    );
  }
  return lines;
}
