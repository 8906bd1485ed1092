import fc from "fast-check";
import { describe, expect, it, vi } from "vitest";
import { CircuitBreaker } from "../../src/workers/breaker.js";
import {
  type DispatchLoad,
  FAILED,
  type LeaseOutcome,
  NEUTRAL,
  WorkerLease,
} from "../../src/workers/lease.js";
import type { Worker } from "../../src/workers/worker.js";
import { WorkerLoad } from "../../src/workers/worker-load.js";
import { idleWorkers, TEST_BREAKER } from "../helpers/idle-workers.js";

const BREAKER = TEST_BREAKER;
const OUTCOMES: Record<string, LeaseOutcome> = {
  ok: { kind: "answered", status: 200 },
  bad_request: { kind: "answered", status: 400 },
  server_error: { kind: "answered", status: 503 },
  failed: FAILED,
  neutral: NEUTRAL,
};

/** A breaker that counts what it is told. */
class CountingBreaker extends CircuitBreaker {
  readonly calls = { dispatch: 0, success: 0, failure: 0, neutral: 0 };
  constructor() {
    super(BREAKER);
  }
  override onDispatch(): void {
    this.calls.dispatch += 1;
    super.onDispatch();
  }
  override onSuccess(): void {
    this.calls.success += 1;
    super.onSuccess();
  }
  override onFailure(): void {
    this.calls.failure += 1;
    super.onFailure();
  }
  override onNeutral(): void {
    this.calls.neutral += 1;
    super.onNeutral();
  }
}

const worker = idleWorkers();

function idle(w: Worker) {
  return {
    inFlight: w.ownInFlight,
    activeChars: w.activeChars,
    pendingPrefillChars: w.pendingPrefillChars,
    pendingPrefillRequests: w.pendingPrefillRequests,
    ranks: w.rankInFlight.filter((n) => n !== 0).length,
  };
}
const IDLE = {
  inFlight: 0,
  activeChars: 0,
  pendingPrefillChars: 0,
  pendingPrefillRequests: 0,
  ranks: 0,
};

describe("WorkerLease", () => {
  it("dispatch takes the load: in flight, active characters, pending prefill, the rank", () => {
    const w = worker();
    w.dispatch({ textChars: 100, uncachedChars: 60, rank: 2 });
    expect(idle(w)).toEqual({
      inFlight: 1,
      activeChars: 100,
      pendingPrefillChars: 60,
      pendingPrefillRequests: 1,
      ranks: 1,
    });
    expect(w.rankInFlight[2]).toBe(1);
  });

  for (const [name, outcome] of Object.entries(OUTCOMES)) {
    for (const sawFirstByte of [false, true]) {
      it(`every count returns to 0 on ${name} (${sawFirstByte ? "after" : "before"} the first byte)`, () => {
        const w = worker();
        const lease = w.dispatch({ textChars: 100, uncachedChars: 60, rank: 1 });
        if (sawFirstByte) {
          lease.firstByte();
          expect(w.pendingPrefillRequests).toBe(0);
          expect(w.pendingPrefillChars).toBe(0);
          expect(w.ownInFlight).toBe(1);
        }
        lease.finish(outcome);
        expect(idle(w)).toEqual(IDLE);
        expect(w.served).toBe(outcome.kind === "answered" ? 1 : 0);
        expect(lease.done).toBe(true);
      });
    }
  }

  it("counts in the visible prefill only a request whose first byte comes as the engine sends it, and says when the last of those is done", () => {
    const w = worker();
    let idled = 0;
    w.onPrefillIdle = () => {
      idled += 1;
    };
    const unseen = w.dispatch({ textChars: 10, uncachedChars: 10, firstByteVisible: false });
    const seen = w.dispatch({ textChars: 10, uncachedChars: 10 });
    expect([w.pendingPrefillRequests, w.visiblePrefillRequests]).toEqual([2, 1]);
    seen.firstByte();
    expect([w.pendingPrefillRequests, w.visiblePrefillRequests, idled]).toEqual([1, 0, 1]);
    unseen.finish({ kind: "answered", status: 200 });
    expect([w.pendingPrefillRequests, w.visiblePrefillRequests, idled]).toEqual([0, 0, 1]);
    seen.finish({ kind: "answered", status: 200 });
    expect(w.visiblePrefillRequests).toBe(0);
  });

  it("finishing twice (or a first byte after the end) changes nothing: no double decrement of another lease's load", () => {
    const w = worker();
    const a = w.dispatch({ textChars: 10, uncachedChars: 10, rank: 0 });
    const b = w.dispatch({ textChars: 20, uncachedChars: 5, rank: 0 });
    a.finish(FAILED);
    a.finish(FAILED);
    a.finish({ kind: "answered", status: 200 });
    a.firstByte();
    expect(idle(w)).toEqual({
      inFlight: 1,
      activeChars: 20,
      pendingPrefillChars: 5,
      pendingPrefillRequests: 1,
      ranks: 1,
    });
    expect(w.served).toBe(0);
    expect(w.breaker.consecutiveFailures).toBe(1);
    b.firstByte();
    b.firstByte();
    expect(w.pendingPrefillRequests).toBe(0);
    expect(w.ownInFlight).toBe(1);
    b.finish(NEUTRAL);
    expect(idle(w)).toEqual(IDLE);
  });

  it("the prefill ahead of a higher priority: what is below it, less what the learned speed computed since the oldest", () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    try {
      vi.setSystemTime(0);
      const w = worker();
      const first = w.dispatch({ textChars: 4000, uncachedChars: 4000, enginePriority: -1 });
      // No speed learned yet: all of it is ahead.
      expect(w.prefillAheadOf(10, 20)).toBe(4000);
      // Not below -1: the engine serves it after them, so nothing is known to be skipped.
      expect(w.prefillAheadOf(-1, 20)).toBeUndefined();
      vi.setSystemTime(40);
      first.firstByte();
      expect(w.prefillAheadOf(10, 40)).toBe(0);
      vi.setSystemTime(100);
      const second = w.dispatch({ textChars: 4000, uncachedChars: 4000, enginePriority: -1 });
      // 4,000 characters in 40 ms: 100 a ms, 20 ms since the oldest was sent.
      expect(w.prefillAheadOf(10, 120)).toBe(2000);
      expect(w.prefillAheadOf(10, 200)).toBe(0);
      const high = w.dispatch({ textChars: 400, uncachedChars: 400, enginePriority: 10 });
      expect(w.prefillAheadOf(10, 120)).toBeUndefined();
      // A short prompt's first byte teaches no speed (400 characters in 1 ms would be 400 a ms).
      vi.setSystemTime(101);
      high.firstByte();
      expect(w.prefillAheadOf(10, 120)).toBe(2000);
      high.finish(FAILED);
      second.finish(NEUTRAL);
      first.finish(NEUTRAL);
      expect(w.prefillAheadOf(10, 300)).toBe(0);
      expect(idle(w)).toEqual(IDLE);
    } finally {
      vi.useRealTimers();
    }
  });

  it("records each outcome in the breaker once: 2xx success, 5xx and failed failures, 4xx and neutral neutral", () => {
    const expected: Record<string, Partial<CountingBreaker["calls"]>> = {
      ok: { success: 1 },
      bad_request: { neutral: 1 },
      server_error: { failure: 1 },
      failed: { failure: 1 },
      neutral: { neutral: 1 },
    };
    for (const [name, outcome] of Object.entries(OUTCOMES)) {
      const breaker = new CountingBreaker();
      const lease = new WorkerLease(new WorkerLoad(), breaker, { textChars: 1, uncachedChars: 1 });
      lease.finish(outcome);
      lease.finish(outcome);
      lease.finish(FAILED);
      expect(breaker.calls, name).toEqual({
        dispatch: 1,
        success: 0,
        failure: 0,
        neutral: 0,
        ...expected[name],
      });
    }
  });

  it("a half-open breaker's trial slot is held by the lease and freed by its neutral end", async () => {
    const w = worker({ failureThreshold: 1, openMs: 0, successThreshold: 1 });
    w.dispatch({ textChars: 1, uncachedChars: 1 }).finish(FAILED);
    // openMs 0: open turns half-open at once, and one trial is admitted.
    expect(w.breaker.state).toBe("half_open");
    const trial = w.dispatch({ textChars: 1, uncachedChars: 1 });
    expect(w.breaker.admits()).toBe(false);
    trial.finish(NEUTRAL);
    expect(w.breaker.admits()).toBe(true);
    const next = w.dispatch({ textChars: 1, uncachedChars: 1 });
    next.finish({ kind: "answered", status: 200 });
    expect(w.breaker.state).toBe("closed");
  });

  it("property: over any sequence of dispatch, firstByte and finish, the counts are the open leases' and return to 0", () => {
    type Op =
      | { op: "dispatch"; load: DispatchLoad }
      | { op: "firstByte"; pick: number }
      | { op: "finish"; pick: number; outcome: string };
    const op: fc.Arbitrary<Op> = fc.oneof(
      fc.record({
        op: fc.constant("dispatch" as const),
        load: fc.record(
          {
            textChars: fc.nat(5000),
            uncachedChars: fc.nat(5000),
            rank: fc.option(fc.nat(3), { nil: undefined }),
          },
          { requiredKeys: ["textChars", "uncachedChars"] },
        ),
      }),
      fc.record({ op: fc.constant("firstByte" as const), pick: fc.nat() }),
      fc.record({
        op: fc.constant("finish" as const),
        pick: fc.nat(),
        outcome: fc.constantFrom(...Object.keys(OUTCOMES)),
      }),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 60 }), (ops) => {
        const load = new WorkerLoad();
        const breaker = new CountingBreaker();
        const leases: {
          lease: WorkerLease;
          load: DispatchLoad;
          prefilling: boolean;
          open: boolean;
        }[] = [];
        let served = 0;
        let ended = 0;
        const check = () => {
          const open = leases.filter((l) => l.open);
          const prefilling = open.filter((l) => l.prefilling);
          expect(load.inFlight).toBe(open.length);
          expect(load.activeChars).toBe(open.reduce((n, l) => n + l.load.textChars, 0));
          expect(load.pendingPrefillRequests).toBe(prefilling.length);
          expect(load.pendingPrefillChars).toBe(
            prefilling.reduce((n, l) => n + l.load.uncachedChars, 0),
          );
          for (let rank = 0; rank < 4; rank++)
            expect(load.rankInFlight[rank] ?? 0).toBe(
              open.filter((l) => l.load.rank === rank).length,
            );
          expect(load.served).toBe(served);
          const { success, failure, neutral, dispatch } = breaker.calls;
          expect(success + failure + neutral).toBe(ended);
          expect(dispatch).toBe(leases.length);
        };
        for (const step of ops) {
          if (step.op === "dispatch") {
            const lease = new WorkerLease(load, breaker, step.load);
            leases.push({ lease, load: step.load, prefilling: true, open: true });
          } else if (leases.length > 0) {
            const entry = leases[step.pick % leases.length]!;
            if (step.op === "firstByte") {
              entry.lease.firstByte();
              if (entry.open) entry.prefilling = false;
            } else {
              const outcome = OUTCOMES[step.outcome]!;
              entry.lease.finish(outcome);
              if (entry.open) {
                ended += 1;
                if (outcome.kind === "answered") served += 1;
              }
              entry.open = false;
              entry.prefilling = false;
            }
          }
          check();
        }
        for (const entry of leases) entry.lease.finish(NEUTRAL);
        expect(load.inFlight).toBe(0);
        expect(load.activeChars).toBe(0);
        expect(load.pendingPrefillChars).toBe(0);
        expect(load.pendingPrefillRequests).toBe(0);
        expect(load.rankInFlight.every((n) => n === 0)).toBe(true);
        const { success, failure, neutral } = breaker.calls;
        expect(success + failure + neutral).toBe(leases.length);
      }),
    );
  });
});
