import { describe, expect, it } from "vitest";
import { SaturationFilter } from "../../src/scheduling/filters.js";
import type { SchedulingContext } from "../../src/scheduling/plugin.js";
import {
  describeSaturation,
  engineSaturation,
  estimatedQueue,
  fleetSaturated,
  freeSlots,
  fullBatchOf,
  type SaturationView,
  saturationReason,
} from "../../src/workers/saturation.js";
import { EngineSignals, type LoadSignals } from "../../src/workers/signals.js";
import { FakeWorker } from "../helpers/saturation-worker.js";

const THRESHOLDS = { queueDepth: 5, kvUsage: 0.9, pendingPrefillChars: 0 };

function view(
  id: string,
  load: LoadSignals | undefined,
  pending = { requests: 0, chars: 0 },
  readAt = 1000,
): SaturationView {
  const signals = new EngineSignals();
  signals.staleAfterMs = 3000;
  if (load !== undefined) signals.recordLoad(load, readAt);
  return {
    id,
    signals,
    pendingPrefillRequests: pending.requests,
    pendingPrefillChars: pending.chars,
  };
}

const load = (queued: number, kvUsage = 0.1, routerPending = 0): LoadSignals => ({
  queued,
  running: 8,
  kvUsage,
  routerPending,
});

describe("saturation of a worker", () => {
  it("is saturated by an engine queue at the threshold, or KV usage at its threshold", () => {
    expect(saturationReason(view("w", load(4)), THRESHOLDS, 1500)).toBeUndefined();
    expect(saturationReason(view("w", load(5)), THRESHOLDS, 1500)).toBe("engine_queue");
    expect(saturationReason(view("w", load(0, 0.95)), THRESHOLDS, 1500)).toBe("kv_usage");
    expect(
      saturationReason(view("w", load(0, 0.95)), { ...THRESHOLDS, kvUsage: 1 }, 1500),
    ).toBeUndefined();
  });

  it("moves the queue reading by this router's pending requests since it was taken", () => {
    // Read with 2 of ours waiting (3 foreign + 2 ours); since then 1 of ours got its first byte.
    const fewer = view("w", load(5, 0.1, 2), { requests: 1, chars: 100 });
    expect(estimatedQueue(fewer, 1500)).toBe(4);
    expect(saturationReason(fewer, THRESHOLDS, 1500)).toBeUndefined();
  });

  it("fills the free batch slots first, as last seen full, before counting a queue", () => {
    const w = view("w", load(3), { requests: 0, chars: 0 }); // batch seen full at 8 running
    expect(estimatedQueue(w, 1500)).toBe(3);
    // Next reading: no queue, 6 running, none of ours pending; then 6 dispatched, no first byte.
    (w.signals as EngineSignals).recordLoad(
      { queued: 0, running: 6, kvUsage: 0.1, routerPending: 0 },
      1600,
    );
    const burst = { ...w, pendingPrefillRequests: 6 };
    expect(estimatedQueue(burst, 1700)).toBe(4);
    expect(saturationReason(burst, THRESHOLDS, 1700)).toBeUndefined();
    expect(saturationReason({ ...w, pendingPrefillRequests: 7 }, THRESHOLDS, 1700)).toBe(
      "engine_queue",
    );
  });

  it("counts from the smaller pending count of a read that spanned a burst (the engine's snapshot may predate it)", () => {
    const w = view(
      "w",
      { queued: 1, running: 2, kvUsage: 0.1, routerPending: 3 },
      {
        requests: 3,
        chars: 0,
      },
    ); // batch seen full at 2
    expect(estimatedQueue(w, 1500)).toBe(1);
    // Read started with none of ours pending and ended with 4 dispatched: the engine may not have
    // seen them yet, so they count as queued beyond the batch.
    (w.signals as EngineSignals).recordLoad(
      { queued: 0, running: 0, kvUsage: 0, routerPending: 4, routerPendingLeast: 0 },
      1600,
    );
    expect(estimatedQueue({ ...w, pendingPrefillRequests: 4 }, 1700)).toBe(2);
    expect(
      saturationReason({ ...w, pendingPrefillRequests: 4 }, { ...THRESHOLDS, queueDepth: 2 }, 1700),
    ).toBe("engine_queue");
  });

  it("trusts the reading's queue alone until the engine was seen full (its free slots unknown)", () => {
    // A fast engine with 16 of ours in flight and never a queue: not saturated.
    const fast = view(
      "w",
      { queued: 0, running: 2, kvUsage: 0.1, routerPending: 0 },
      {
        requests: 16,
        chars: 16_000,
      },
    );
    expect(estimatedQueue(fast, 1500)).toBe(0);
    expect(saturationReason(fast, THRESHOLDS, 1500)).toBeUndefined();
  });

  it("without a fresh reading, counts only this router's requests beyond the batch last seen full", () => {
    const w = view("w", load(3), { requests: 0, chars: 0 }, 1000); // batch seen full at 8
    expect(estimatedQueue(w, 1500)).toBe(3);
    // The reading goes stale: its queue of 3 is no longer trusted; 10 of ours are pending.
    const later = { ...w, pendingPrefillRequests: 10 };
    expect(estimatedQueue(later, 5000)).toBe(2);
    expect(saturationReason({ ...w, pendingPrefillRequests: 13 }, THRESHOLDS, 5000)).toBe(
      "engine_queue",
    );
    expect(
      saturationReason({ ...w, pendingPrefillRequests: 12 }, THRESHOLDS, 5000),
    ).toBeUndefined();
  });

  it("never trusts a stale reading: neither saturated nor estimated by it", () => {
    const stale = view("w", load(50, 0.99), { requests: 0, chars: 0 }, 1000);
    // A reading the router never looked at while it was fresh: nothing known at all.
    expect(estimatedQueue(stale, 1000 + 3001)).toBeUndefined();
    expect(saturationReason(stale, THRESHOLDS, 1000 + 3001)).toBeUndefined();
    expect(describeSaturation(stale, THRESHOLDS, 1000 + 3001)).toMatchObject({
      saturated: false,
      estimatedQueue: null,
      kvUsage: null,
    });
    // Seen fresh (queue 50, KV 99%), then stale: its queue and KV usage no longer count.
    expect(saturationReason(stale, THRESHOLDS, 1000 + 2999)).toBe("engine_queue");
    expect(saturationReason(stale, THRESHOLDS, 1000 + 3001)).toBeUndefined();
    expect(estimatedQueue(stale, 1000 + 3001)).toBe(0);
  });

  it("judges a worker without engine readings by the router's own pending prefill only", () => {
    const none = view("w", undefined, { requests: 3, chars: 50_000 });
    expect(saturationReason(none, THRESHOLDS, 1500)).toBeUndefined();
    expect(saturationReason(none, { ...THRESHOLDS, pendingPrefillChars: 40_000 }, 1500)).toBe(
      "pending_prefill",
    );
  });
});

describe("saturation of the fleet", () => {
  it("is saturated only when every candidate is, and never with no candidate", () => {
    const full = view("a", load(9));
    const room = view("b", load(1));
    expect(fleetSaturated([full, room], THRESHOLDS, 1500)).toBe(false);
    expect(fleetSaturated([full, view("c", load(0, 0.95))], THRESHOLDS, 1500)).toBe(true);
    expect(fleetSaturated([], THRESHOLDS, 1500)).toBe(false);
  });

  it("a disaggregated fleet is saturated when either side is: a request needs one of each", () => {
    const side = (v: SaturationView, type: string): SaturationView => ({ ...v, role: { type } });
    const prefillRoom = side(view("p", load(1)), "prefill");
    const decodeFull = side(view("d", load(9)), "decode");
    const decodeRoom = side(view("e", load(1)), "decode");
    expect(fleetSaturated([prefillRoom, decodeFull], THRESHOLDS, 1500)).toBe(true);
    expect(fleetSaturated([prefillRoom, decodeFull, decodeRoom], THRESHOLDS, 1500)).toBe(false);
    expect(
      fleetSaturated([decodeFull, side(view("q", load(9)), "prefill")], THRESHOLDS, 1500),
    ).toBe(true);
  });
});

describe("the engine's full batch", () => {
  it("is not shrunk by one reading taken while a burst of ends is refilled (issue 24)", () => {
    const signals = new EngineSignals();
    signals.staleAfterMs = 3000;
    signals.recordLoad({ queued: 1, running: 8, kvUsage: 0.1, routerPending: 0 }, 1000);
    const worker: SaturationView = {
      id: "w",
      signals,
      pendingPrefillRequests: 0,
      pendingPrefillChars: 0,
    };
    const threshold = { ...THRESHOLDS, queueDepth: 1 };
    expect(estimatedQueue(worker, 1500)).toBe(1);
    // Ends freed 5 slots; the engine has not admitted the next arrivals yet: a queue of 1 beside
    // a batch of 3. The batch is still 8: 4 held, room for 4 more.
    const refilling = { queued: 1, running: 3, kvUsage: 0.1, routerPending: 0 };
    signals.recordLoad(refilling, 2000);
    expect(estimatedQueue(worker, 2100)).toBe(0);
    expect(saturationReason(worker, threshold, 2100)).toBeUndefined();
    // Read again and again like that, the engine's batch did shrink: learned.
    signals.recordLoad({ ...refilling }, 2500);
    expect(estimatedQueue(worker, 2600)).toBe(0);
    signals.recordLoad({ ...refilling }, 3000);
    expect(estimatedQueue(worker, 3100)).toBe(1);
    // A larger batch seen full is learned at once.
    signals.recordLoad({ queued: 2, running: 8, kvUsage: 0.1, routerPending: 0 }, 3500);
    expect(estimatedQueue(worker, 3600)).toBe(2);
    signals.recordLoad({ queued: 0, running: 7, kvUsage: 0.1, routerPending: 0 }, 4000);
    expect(estimatedQueue(worker, 4100)).toBe(0);
  });
});

describe("the engine's said running cap", () => {
  it("is the batch before a reading shows the engine full, and a reading below it must repeat to shrink it", () => {
    const signals = new EngineSignals();
    signals.staleAfterMs = 3000;
    signals.maxRunning = 8;
    let own = 0;
    const worker: SaturationView = {
      id: "w",
      signals,
      pendingPrefillRequests: 0,
      pendingPrefillChars: 0,
      get ownInFlight() {
        return own;
      },
    };
    // Idle at the reading; 9 dispatched since: 8 run, 1 waits.
    signals.recordLoad(
      { queued: 0, running: 0, kvUsage: 0.1, routerPending: 0, routerInFlightLeast: 0 },
      1000,
    );
    own = 9;
    expect(estimatedQueue(worker, 1100)).toBe(1);
    // A refill snapshot below the cap does not shrink it at once.
    signals.recordLoad(
      { queued: 1, running: 3, kvUsage: 0.1, routerPending: 0, routerInFlightLeast: 4 },
      1500,
    );
    own = 4;
    expect(estimatedQueue(worker, 1600)).toBe(0);
  });

  it("is never shrunk by a queue of this router's own fresh requests, however often it is read (a flood's ramp)", () => {
    const signals = new EngineSignals();
    signals.staleAfterMs = 3000;
    signals.maxRunning = 8;
    const worker: SaturationView = {
      id: "w",
      signals,
      pendingPrefillRequests: 8,
      pendingPrefillChars: 0,
      ownInFlight: 8,
    };
    // 8 sent at once; a step's prefill budget takes two 1,000-token prompts, so each reading shows
    // some running and the rest queued, all of them this router's requests without a first byte.
    for (const [i, running] of [2, 4, 5, 5, 6].entries()) {
      const at = 1000 + 500 * i;
      signals.recordLoad(
        { queued: 8 - running, running, kvUsage: 0.3, routerPending: 8, routerInFlightLeast: 8 },
        at,
      );
      expect(fullBatchOf(worker)).toBe(8);
      expect(freeSlots(worker, at + 1)).toBe(0);
    }
    // A queue beyond this router's requests there (another's work) beside the smaller batch,
    // read three times in a row, does shrink it.
    for (let i = 0; i < 3; i++) {
      signals.recordLoad(
        { queued: 3, running: 6, kvUsage: 0.3, routerPending: 2, routerInFlightLeast: 8 },
        4000 + 500 * i,
      );
      freeSlots(worker, 4001 + 500 * i);
    }
    expect(fullBatchOf(worker)).toBe(6);
  });
});

describe("--saturation-queue-depth 0", () => {
  it("saturates a worker once its batch is full, not before, so a request let go never queues at the engine (issue 24)", () => {
    const depth0 = { ...THRESHOLDS, queueDepth: 0 };
    const signals = new EngineSignals();
    signals.staleAfterMs = 3000;
    const worker: SaturationView = {
      id: "w",
      signals,
      pendingPrefillRequests: 0,
      pendingPrefillChars: 0,
    };
    // Never seen full, no queue: free slots unknown, counted as room.
    signals.recordLoad({ queued: 0, running: 3, kvUsage: 0.1, routerPending: 0 }, 1000);
    expect(saturationReason(worker, depth0, 1100)).toBeUndefined();
    // Seen full with a queue: saturated.
    signals.recordLoad({ queued: 1, running: 8, kvUsage: 0.1, routerPending: 0 }, 1500);
    expect(saturationReason(worker, depth0, 1600)).toBe("engine_queue");
    // Full, nothing queued: saturated at depth 0, not at depth 1.
    signals.recordLoad({ queued: 0, running: 8, kvUsage: 0.1, routerPending: 0 }, 2000);
    expect(saturationReason(worker, depth0, 2100)).toBe("engine_queue");
    expect(saturationReason(worker, { ...depth0, queueDepth: 1 }, 2100)).toBeUndefined();
    // One slot free: room.
    signals.recordLoad({ queued: 0, running: 7, kvUsage: 0.1, routerPending: 0 }, 2500);
    expect(saturationReason(worker, depth0, 2600)).toBeUndefined();
    expect(estimatedQueue(worker, 2600)).toBe(0);
  });
});

describe("engineSaturation: the one rule admission and the scheduling filter share", () => {
  it("a queue at the depth or KV usage at the threshold saturates; a KV threshold of 1 never does", () => {
    const t = { queueDepth: 5, kvUsage: 0.8 };
    const load = (queued: number, kvUsage: number) => ({ queued, running: 1, kvUsage });
    expect(engineSaturation(load(0, 0.1), t, 5)).toBe("engine_queue");
    expect(engineSaturation(load(0, 0.1), t, 4)).toBeUndefined();
    expect(engineSaturation(load(0, 0.8), t, 0)).toBe("kv_usage");
    expect(engineSaturation(load(0, 1), { ...t, kvUsage: 1 }, 0)).toBeUndefined();
    // No reading and no queue figure: not saturated (an engine that exposes nothing still routes).
    expect(engineSaturation(undefined, t, undefined)).toBeUndefined();
  });

  it("admission judges the estimated queue, the filter the engine's reported one, by the same rule", () => {
    const worker = new FakeWorker("w");
    const signals = worker.signals;
    signals.staleAfterMs = 3000;
    // Seen full at 8 running with 1 queued, then 3 of this router's requests ended since.
    signals.recordLoad({ queued: 1, running: 8, kvUsage: 0.1, routerPending: 3 }, 1000);
    const filter = new SaturationFilter("sat", {
      queueDepthThreshold: 1,
      kvCacheUtilThreshold: 0.9,
    });
    const seen = { id: "w", inFlight: 0, signals };
    expect(filter.admits(seen, { now: 1100 } as SchedulingContext)).toBe(false);
    expect(saturationReason(worker, { ...THRESHOLDS, queueDepth: 1 }, 1100)).toBeUndefined();
  });
});
