import type { PolicyWorker } from "../../src/policies/policy.js";
import { mulberry32 } from "../../src/sim/prng.js";
import { RadixTree } from "../../src/tree/radix-tree.js";

/** A worker as a policy sees it; `inFlight` is writable so tests can play the router's part. */
export interface FakeWorker extends PolicyWorker {
  inFlight: number;
}

export function fakeWorker(id: string, inFlight = 0): FakeWorker {
  return { id, inFlight, tree: new RadixTree() };
}

/** Workers w0..w(n-1), with the given loads (0 where missing). */
export function fleet(n: number, loads: readonly number[] = []): FakeWorker[] {
  return Array.from({ length: n }, (_, i) => fakeWorker(`w${i}`, loads[i] ?? 0));
}

/** A small seeded PRNG, so tests of the random policies are deterministic. */
export const seededRandom = mulberry32;

/** A text whose first character differs for every i < 20000: no two share a prefix. */
export function coldText(i: number, length = 40): string {
  return String.fromCharCode(0x4e00 + i) + "x".repeat(length - 1);
}
