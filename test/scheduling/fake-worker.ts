import { mulberry32 } from "../../sim/prng.js";
import type {
  Policy,
  PolicyWorker,
  RouteDecision,
  RouteRequest,
} from "../../src/scheduling/policy.js";
import { RadixTree } from "../../src/tree/radix-tree.js";

/**
 * A worker as a policy sees it, plus a tree of its own standing in for the prefix index (the
 * policy never reads it: `selectWith` turns it into the `matched` lengths the decider would pass).
 * `inFlight` is writable so tests can play the router's part.
 */
export interface FakeWorker extends PolicyWorker {
  inFlight: number;
  readonly tree: RadixTree;
}

export function fakeWorker(id: string, inFlight = 0): FakeWorker {
  return { id, inFlight, tree: new RadixTree() };
}

/** Workers w0..w(n-1), with the given loads (0 where missing). */
export function fleet(n: number, loads: readonly number[] = []): FakeWorker[] {
  return Array.from({ length: n }, (_, i) => fakeWorker(`w${i}`, loads[i] ?? 0));
}

/**
 * Plays the decider (src/scheduling/scheduler.ts) over the fake workers' own trees: matched lengths
 * in, the text into the chosen worker's tree out, for policies that use prefixes.
 */
export function selectWith<W extends FakeWorker>(
  policy: Policy,
  candidates: readonly W[],
  request: RouteRequest,
): RouteDecision<W> | undefined {
  const uses = policy.usesPrefixes && request.text.length > 0;
  const matched = uses ? candidates.map((w) => w.tree.match(request.text)) : undefined;
  const decision = policy.select(candidates, { ...request, matched });
  if (decision !== undefined && uses) decision.worker.tree.insert(request.text);
  return decision;
}

/** A small seeded PRNG, so tests of the random policies are deterministic. */
export const seededRandom = mulberry32;

/** A text whose first character differs for every i < 20000: no two share a prefix. */
export function coldText(i: number, length = 40): string {
  return String.fromCharCode(0x4e00 + i) + "x".repeat(length - 1);
}
