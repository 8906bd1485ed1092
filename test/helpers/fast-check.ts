/**
 * What a test file gets when it imports "fast-check" (vitest.config.ts redirects it here; this
 * file alone reaches the real package). In the suite every property runs from one fixed seed, so
 * a counterexample fails every run alike and is reproduced by running the file again; the seed
 * fast-check prints with it is that one. `npm run test:props` sets RADIXGATE_PROPS_SEED and
 * RADIXGATE_PROPS_RUNS to explore instead: every property from that seed, with at least that many
 * runs, whatever seed and run count the test asks for itself.
 */
import fc, { type IAsyncProperty, type IProperty, type Parameters } from "fast-check";

export * from "fast-check";

/** The suite's seed: any fixed integer; a change only moves which cases the suite tries. */
export const SUITE_SEED = 20_261_129;

const exploreRuns = Number(process.env.RADIXGATE_PROPS_RUNS ?? 0);
const seed = Number(process.env.RADIXGATE_PROPS_SEED ?? SUITE_SEED);
if (!Number.isSafeInteger(seed) || !Number.isSafeInteger(exploreRuns) || exploreRuns < 0) {
  throw new Error(
    `RADIXGATE_PROPS_SEED/RADIXGATE_PROPS_RUNS must be integers, got ${process.env.RADIXGATE_PROPS_SEED}/${process.env.RADIXGATE_PROPS_RUNS}`,
  );
}
fc.configureGlobal({ ...fc.readConfigureGlobal(), seed });

/** In exploration, the test's own seed and smaller run count give way to the explorer's. */
function explored<T>(params: Parameters<T> | undefined): Parameters<T> | undefined {
  if (exploreRuns === 0) return params;
  return { ...params, seed, numRuns: Math.max(params?.numRuns ?? 100, exploreRuns) };
}

function assert<Ts>(property: IAsyncProperty<Ts>, params?: Parameters<Ts>): Promise<void>;
function assert<Ts>(property: IProperty<Ts>, params?: Parameters<Ts>): void;
function assert<Ts>(
  property: IProperty<Ts> | IAsyncProperty<Ts>,
  params?: Parameters<Ts>,
): void | Promise<void> {
  return fc.assert(property as IProperty<Ts>, explored(params));
}

const wrapped: typeof fc = { ...fc, assert: assert as typeof fc.assert };

export { assert };
export default wrapped;
