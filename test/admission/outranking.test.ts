import { describe, expect, it } from "vitest";
import { outranksLowerWork } from "../../src/admission/outranking.js";
import { PriorityTally } from "../../src/workers/priority-tally.js";
import { type SaturationView, saturationReason } from "../../src/workers/saturation.js";
import { EngineSignals, type LoadSignals } from "../../src/workers/signals.js";

const THRESHOLDS = { queueDepth: 1, kvUsage: 0.9, pendingPrefillChars: 0 };
const NOW = 1500;

/** A worker whose engine was read at 1000 with this router's `own` requests in flight there. */
function worker(
  reading: Partial<LoadSignals>,
  own: readonly number[],
  extra: Partial<SaturationView> = {},
) {
  const signals = new EngineSignals();
  signals.staleAfterMs = 3000;
  signals.recordLoad(
    { queued: 1, running: 2, kvUsage: 0.1, routerInFlightLeast: own.length, ...reading },
    1000,
  );
  const tally = new PriorityTally();
  for (const p of own) tally.add(p, 1);
  const view = {
    id: "w",
    signals,
    pendingPrefillRequests: 0,
    pendingPrefillChars: 0,
    ownInFlight: own.length,
    ownInFlightBelow: (p: number) => tally.below(p),
    ...extra,
  };
  /** One more request of ours there, sent with `p` (what a release by outranking does). */
  const dispatch = (p: number) => {
    tally.add(p, 1);
    view.ownInFlight += 1;
  };
  return { view, dispatch };
}

describe("outranksLowerWork: room on a saturated worker over lower-priority work", () => {
  it("a batch full of lower work (2 running, 1 queued, all ours at 0): room for 10, none for 0 or -1", () => {
    const { view } = worker({}, [0, 0, 0]);
    expect(saturationReason(view, THRESHOLDS, NOW)).toBe("engine_queue");
    expect(outranksLowerWork(view, 10, THRESHOLDS, NOW)).toBe(true);
    expect(outranksLowerWork(view, 1, THRESHOLDS, NOW)).toBe(true);
    expect(outranksLowerWork(view, 0, THRESHOLDS, NOW)).toBe(false);
    expect(outranksLowerWork(view, -1, THRESHOLDS, NOW)).toBe(false);
  });

  it("lets at most a full batch of one priority go over lower work: each release joins the count", () => {
    const { view, dispatch } = worker({}, [0, 0, 0, 0, 0]);
    let released = 0;
    while (outranksLowerWork(view, 10, THRESHOLDS, NOW) && released < 100) {
      dispatch(10);
      released += 1;
    }
    expect(released).toBe(2);
    // A still higher priority outranks those too, again at most a batch.
    expect(outranksLowerWork(view, 20, THRESHOLDS, NOW)).toBe(true);
  });

  it("counts others' work (unknown priority) as ahead: the engine queue without our lower work must be below the depth", () => {
    // Queue 4 at the reading: 1 of ours, 3 from another client.
    const { view } = worker({ queued: 4 }, [0, 0, 0]);
    expect(outranksLowerWork(view, 10, THRESHOLDS, NOW)).toBe(false);
    expect(outranksLowerWork(view, 10, { ...THRESHOLDS, queueDepth: 2 }, NOW)).toBe(true);
  });

  it("counts our requests sent without a priority as ahead", () => {
    const { view } = worker({}, [0, 0, 0], { ownInFlight: 5 });
    expect(outranksLowerWork(view, 10, THRESHOLDS, NOW)).toBe(false);
  });

  it("never without a fresh reading, a known batch, or a tally; never when pending prefill or KV usage saturates", () => {
    const { view } = worker({}, [0, 0, 0]);
    expect(outranksLowerWork(view, 10, THRESHOLDS, 1000 + 3001)).toBe(false);
    // A reading with a queue but nothing running: the batch is never learned.
    const signals = new EngineSignals();
    signals.staleAfterMs = 3000;
    signals.recordLoad({ queued: 3, running: 0, kvUsage: 0.1 }, 1000);
    const neverFull = { ...worker({}, [0, 0]).view, signals };
    expect(outranksLowerWork(neverFull, 10, THRESHOLDS, NOW)).toBe(false);
    const { ownInFlightBelow: _, ...untallied } = view;
    expect(outranksLowerWork(untallied, 10, THRESHOLDS, NOW)).toBe(false);
    expect(outranksLowerWork(worker({ kvUsage: 0.95 }, [0, 0, 0]).view, 10, THRESHOLDS, NOW)).toBe(
      false,
    );
    const prefilling = worker({}, [0, 0, 0], { pendingPrefillChars: 5000 }).view;
    expect(
      outranksLowerWork(prefilling, 10, { ...THRESHOLDS, pendingPrefillChars: 4000 }, NOW),
    ).toBe(false);
  });
});
