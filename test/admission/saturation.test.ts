import { describe, expect, it } from "vitest";
import {
  describeSaturation,
  estimatedQueue,
  fleetSaturated,
  type SaturationView,
  saturationReason,
} from "../../src/admission/saturation.js";
import { EngineSignals, type LoadSignals } from "../../src/workers/signals.js";

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
    // Read with 2 of ours waiting: 3 foreign + 2 ours = 5... later 1 of ours left, 0 new.
    const fewer = view("w", load(5, 0.1, 2), { requests: 1, chars: 100 });
    expect(estimatedQueue(fewer, 1500)).toBe(4);
    expect(saturationReason(fewer, THRESHOLDS, 1500)).toBeUndefined();
    // Read empty; since then 6 of ours were dispatched and have no first byte yet.
    const burst = view("w", load(0), { requests: 6, chars: 600 });
    expect(estimatedQueue(burst, 1500)).toBe(6);
    expect(saturationReason(burst, THRESHOLDS, 1500)).toBe("engine_queue");
  });

  it("never trusts a stale reading: neither saturated nor estimated by it", () => {
    const stale = view("w", load(50, 0.99), { requests: 0, chars: 0 }, 1000);
    expect(saturationReason(stale, THRESHOLDS, 1000 + 2999)).toBe("engine_queue");
    expect(saturationReason(stale, THRESHOLDS, 1000 + 3001)).toBeUndefined();
    expect(estimatedQueue(stale, 1000 + 3001)).toBeUndefined();
    expect(describeSaturation(stale, THRESHOLDS, 1000 + 3001)).toMatchObject({
      saturated: false,
      estimatedQueue: null,
      kvUsage: null,
    });
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
});
