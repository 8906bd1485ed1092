/**
 * Seeded pseudo-random numbers for workloads: mulberry32 (32-bit state, fast, statistically fine
 * for test data; not for anything secret). The same seed always yields the same sequence.
 */

/** A generator of floats uniform in [0, 1). */
export type Rng = () => number;

export function mulberry32(seed: number): Rng {
  if (!Number.isFinite(seed)) throw new RangeError(`seed must be a finite number, got ${seed}`);
  let state = Math.trunc(seed) >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** An integer uniform in [0, n). */
export function randomInt(rng: Rng, n: number): number {
  return Math.floor(rng() * n);
}

export function pick<T>(rng: Rng, items: readonly T[]): T {
  if (items.length === 0) throw new RangeError("pick from an empty list");
  return items[randomInt(rng, items.length)] as T;
}

/** Fisher–Yates, in place; returns the same array for chaining. */
export function shuffleInPlace<T>(rng: Rng, items: T[]): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = randomInt(rng, i + 1);
    const tmp = items[i] as T;
    items[i] = items[j] as T;
    items[j] = tmp;
  }
  return items;
}

/** An exponentially distributed value with the given mean (inter-arrival gap of a Poisson process). */
export function exponential(rng: Rng, mean: number): number {
  // 1 - u lies in (0, 1], so the logarithm is finite.
  return -Math.log(1 - rng()) * mean;
}
