import { afterEach } from "vitest";
import { Worker } from "../../src/workers/worker.js";

/** A breaker that never opens within a unit test (three failures, a minute open). */
export const TEST_BREAKER = { failureThreshold: 3, openMs: 60_000, successThreshold: 1 };

/**
 * A maker of Workers that are never sent anything (their URL is the discard port), for tests of
 * a worker's own counts; every one made is closed after each test of the calling file.
 */
export function idleWorkers(): (breaker?: typeof TEST_BREAKER) => Worker {
  const made: Worker[] = [];
  afterEach(async () => {
    for (const w of made.splice(0)) await w.pool.close();
  });
  return (breaker = TEST_BREAKER) => {
    const w = new Worker("w", "http://127.0.0.1:9", {
      breaker,
      connectTimeoutMs: 1000,
    });
    made.push(w);
    return w;
  };
}
