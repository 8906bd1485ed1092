import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { FAILED, type LeaseOutcome, NEUTRAL, type WorkerLease } from "../../src/workers/lease.js";
import { PriorityTally } from "../../src/workers/priority-tally.js";
import { idleWorkers } from "../helpers/idle-workers.js";

const OUTCOMES: LeaseOutcome[] = [{ kind: "answered", status: 200 }, FAILED, NEUTRAL];

const worker = idleWorkers();

describe("PriorityTally", () => {
  it("counts requests per priority, below a priority strictly, and forgets a priority at 0", () => {
    const tally = new PriorityTally();
    tally.add(0, 1);
    tally.add(0, 1);
    tally.add(-1, 1);
    tally.add(10, 1);
    expect(tally.below(10)).toBe(3);
    expect(tally.below(0)).toBe(1);
    expect(tally.below(-1)).toBe(0);
    expect(tally.toJSON()).toEqual([
      { priority: 10, requests: 1 },
      { priority: 0, requests: 2 },
      { priority: -1, requests: 1 },
    ]);
    tally.add(10, -1);
    tally.add(-1, -1);
    expect(tally.size).toBe(1);
    expect(tally.below(100)).toBe(2);
  });
});

describe("a worker's in-flight engine priorities (the lease keeps them)", () => {
  it("a lease adds its priority at dispatch and takes it back once at its end, whatever the outcome", () => {
    for (const outcome of OUTCOMES) {
      const w = worker();
      const high = w.dispatch({ textChars: 10, uncachedChars: 10, enginePriority: 10 });
      const low = w.dispatch({ textChars: 10, uncachedChars: 10, enginePriority: -1 });
      w.dispatch({ textChars: 10, uncachedChars: 10 }); // sent without a priority: never below
      expect(w.ownInFlightBelow(10)).toBe(1);
      expect(w.ownInFlightBelow(11)).toBe(2);
      expect(w.ownInFlightBelow(-1)).toBe(0);
      low.firstByte();
      expect(w.ownInFlightBelow(0)).toBe(1); // counted until its end, not its first byte
      low.finish(outcome);
      low.finish(outcome);
      expect(w.ownInFlightBelow(11)).toBe(1);
      high.finish(outcome);
      expect(w.ownInFlightBelow(101)).toBe(0);
      expect(w.toJSON()).not.toHaveProperty("in_flight_by_engine_priority");
    }
  });

  it("matches the live leases after any interleaving of dispatches and (repeated) ends", () => {
    const step = fc.oneof(
      fc.record({ dispatch: fc.integer({ min: -101, max: 100 }) }),
      fc.record({ end: fc.nat(), outcome: fc.constantFrom(...OUTCOMES) }),
    );
    fc.assert(
      fc.property(
        fc.array(step, { maxLength: 60 }),
        fc.integer({ min: -102, max: 101 }),
        (steps, probe) => {
          const w = worker();
          // The model keeps its own record of ended leases (not the lease's `done`), so a lease
          // that misreports its end cannot make the model agree with a wrong tally.
          const leases: { lease: WorkerLease; priority: number; ended: boolean }[] = [];
          for (const s of steps) {
            if ("dispatch" in s) {
              const lease = w.dispatch({
                textChars: 1,
                uncachedChars: 1,
                enginePriority: s.dispatch,
              });
              leases.push({ lease, priority: s.dispatch, ended: false });
            } else if (leases.length > 0) {
              const ending = leases[s.end % leases.length]!;
              ending.lease.finish(s.outcome);
              ending.ended = true;
            }
            const live = leases.filter((l) => !l.ended);
            expect(w.ownInFlightBelow(probe)).toBe(live.filter((l) => l.priority < probe).length);
          }
          for (const { lease } of leases) lease.finish(NEUTRAL);
          expect(w.ownInFlightBelow(101)).toBe(0);
          expect(w.ownInFlight).toBe(0);
        },
      ),
      { numRuns: 200 },
    );
  });
});
