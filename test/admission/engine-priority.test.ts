import { describe, expect, it } from "vitest";
import { Admission, demotionLosesPreemption } from "../../src/admission/admission.js";
import { AdmissionQueue } from "../../src/admission/admission-queue.js";
import type { RequestIdentity } from "../../src/admission/identity.js";
import type { AdmissionTicket } from "../../src/admission/step.js";
import { Cancel } from "../../src/proxy/cancel.js";
import type { SaturationView } from "../../src/workers/saturation.js";

const THRESHOLDS = { queueDepth: 5, kvUsage: 0.9, pendingPrefillChars: 0 };

function ticket(identity: RequestIdentity, signal = new Cancel()): AdmissionTicket {
  return {
    identity: () => identity,
    candidates: () => [],
    cost: () => 100,
    promptChars: () => 400,
    maxTokens: () => undefined,
    timeoutMs: () => 10_000,
    signal,
  };
}

/** A queue that lets one request run at once (the rest wait), and admission over it. */
function oneAtATime() {
  const queue = new AdmissionQueue({
    maxConcurrent: 1,
    queueSize: 100,
    maxQueuedPerTenant: 100,
    queueWhenSaturated: false,
    thresholds: THRESHOLDS,
    recheckMs: 5,
  });
  return { queue, admission: new Admission(queue, THRESHOLDS, false) };
}

describe("Admission.enginePriority (--engine-priority)", () => {
  it("is the request's priority, one step lower while its tenant holds over half the waiting at that priority", async () => {
    const { queue, admission } = oneAtATime();
    const flood = { tenant: "A", priority: 0 };
    const light = { tenant: "B", priority: 0 };
    // Nothing waits: every tenant keeps its priority.
    expect(admission.enginePriority(ticket(flood))).toBe(0);
    const first = queue.enter(ticket(flood));
    expect(typeof first).toBe("function");
    const cancel = new Cancel();
    const waiting = [1, 2, 3].map(() => queue.enter(ticket(flood, cancel)));
    expect(queue.waiting).toBe(3);
    expect(admission.enginePriority(ticket(flood))).toBe(-1);
    // Counted per priority: A floods at 0, not at 10, so its priority-10 requests keep 10. (A
    // demotion to 9 put them exactly SGLang's default preemption threshold, 10, above a flood
    // request sent at -1: the engine did not preempt for them.)
    expect(admission.enginePriority(ticket({ tenant: "A", priority: 10 }))).toBe(10);
    expect(admission.enginePriority(ticket(light))).toBe(0);
    cancel.abort();
    await Promise.allSettled(waiting);
  });
});

describe("the demotion rule at SGLang's preemption threshold", () => {
  /** A candidate where this router's lowest engine priority in flight is `lowest`. */
  function candidate(lowest: number, threshold?: number): SaturationView {
    return {
      id: "w",
      pendingPrefillRequests: 0,
      pendingPrefillChars: 0,
      lowestEnginePriority: () => lowest,
      signals: { load: () => undefined, preemptionThreshold: threshold },
    };
  }

  it("never demotes a request to exactly the threshold above the lowest work in flight", () => {
    // The flood runs at -1 (its tenant's 0, demoted). 10 is 11 above: SGLang preempts (> 10);
    // 9 would be exactly 10 above: it would not.
    expect(demotionLosesPreemption([candidate(-1)], 10)).toBe(true);
    expect(demotionLosesPreemption([candidate(-1, 10)], 10)).toBe(true);
    // 12 demoted to 11 still preempts; 5 preempts neither way: the demotion costs nothing.
    expect(demotionLosesPreemption([candidate(-1)], 12)).toBe(false);
    expect(demotionLosesPreemption([candidate(-1)], 5)).toBe(false);
    // The engine's own threshold (/get_server_info) is the one counted.
    expect(demotionLosesPreemption([candidate(-1, 5)], 10)).toBe(false);
    expect(demotionLosesPreemption([candidate(-1, 5)], 5)).toBe(true);
  });

  it("a flooding tenant's high-priority request keeps its priority where the demotion would lose the preemption", async () => {
    const { queue, admission } = oneAtATime();
    const high = { tenant: "A", priority: 10 };
    const withCandidates = (c: SaturationView[]): AdmissionTicket => ({
      ...ticket(high),
      candidates: () => c,
    });
    expect(typeof queue.enter(ticket(high))).toBe("function");
    const cancel = new Cancel();
    const waiting = queue.enter(ticket(high, cancel));
    // A holds 1 of 1 waiting at 10: over half, so one step lower, unless that loses the preemption.
    expect(admission.enginePriority(withCandidates([candidate(5)]))).toBe(9);
    expect(admission.enginePriority(withCandidates([candidate(-1)]))).toBe(10);
    expect(admission.enginePriority(withCandidates([candidate(-1, 3)]))).toBe(9);
    cancel.abort();
    await Promise.allSettled([waiting]);
  });
});
