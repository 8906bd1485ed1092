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

describe("a tenant over its share reaches the engine past the preemption threshold", () => {
  /** A worker with a said batch cap, this router's requests there, and their lowest priority. */
  function slotWorker(cap: number, threshold?: number) {
    const w = {
      id: `w${cap}`,
      ownInFlight: 0,
      lowest: undefined as number | undefined,
      pendingPrefillRequests: 0,
      pendingPrefillChars: 0,
      lowestEnginePriority: () => w.lowest,
      signals: { load: () => undefined, maxRunning: cap, preemptionThreshold: threshold },
    };
    return w;
  }

  function setUp(threshold?: number) {
    const queue = new AdmissionQueue({
      maxConcurrent: 0,
      queueSize: 100,
      maxQueuedPerTenant: 100,
      queueWhenSaturated: true,
      thresholds: { queueDepth: 1, kvUsage: 1, pendingPrefillChars: 0 },
      reserveSlots: 1,
    });
    const worker = slotWorker(8, threshold);
    const admission = new Admission(queue, THRESHOLDS, true, [], [], true);
    const at = (identity: RequestIdentity): AdmissionTicket => ({
      ...ticket(identity),
      candidates: () => [worker],
    });
    /** Admits a request and places it, as the forwarder would, at the priority it was given. */
    const go = async (identity: RequestIdentity) => {
      const pass = await admission.pass(at(identity));
      worker.ownInFlight += 1;
      worker.lowest = Math.min(worker.lowest ?? Number.POSITIVE_INFINITY, pass.priority ?? 0);
      return pass;
    };
    return { queue, admission, worker, at, go };
  }

  it("goes 11 below (SGLang's default threshold 10) while another tenant asks at its priority; a tenant alone keeps it", async () => {
    const { admission, at, go } = setUp();
    const flood = { tenant: "A", priority: 0 };
    // Alone at 0 (however much it holds), and a single request of its own at 10: never lowered.
    for (let i = 0; i < 4; i++) expect((await go(flood)).priority).toBe(0);
    expect(admission.enginePriority(at({ tenant: "A", priority: 10 }))).toBe(10);
    // Another tenant asks at 0: A holds 4 of 8 slots, its share (8 / 2): its next goes 11 lower,
    // so B's 0 is above it by more than the threshold and the engine preempts it for B.
    expect((await go({ tenant: "B", priority: 0 })).priority).toBe(0);
    expect((await go(flood)).priority).toBe(-11);
    expect(admission.enginePriority(at({ tenant: "B", priority: 0 }))).toBe(0);
    // Its own next request stays that low: it never outranks (and preempts) its own work.
    expect(admission.enginePriority(at(flood))).toBe(-11);
  });

  it("counts the engine's own threshold, and never lowers a request out of a preemption it has", async () => {
    const { admission, at, go } = setUp(0);
    await go({ tenant: "B", priority: 0 });
    for (let i = 0; i < 4; i++) await go({ tenant: "A", priority: 0 });
    // Threshold 0: one step past it is enough.
    expect(admission.enginePriority(at({ tenant: "A", priority: 0 }))).toBe(-1);

    const guarded = setUp();
    // The lowest work in flight is a flood at -1 (another tenant's; A's 10 is 11 above it).
    guarded.worker.lowest = -1;
    await guarded.go({ tenant: "B", priority: 10 });
    guarded.worker.lowest = -1;
    for (let i = 0; i < 4; i++) await guarded.go({ tenant: "A", priority: 10 });
    // A is over its share at 10 beside B, but -1 would lose the preemption over the -1 flood.
    expect(guarded.admission.enginePriority(guarded.at({ tenant: "A", priority: 10 }))).toBe(10);
  });

  it("keeps no slot free for the others where every engine preempts the yielding tenant's work for them", async () => {
    for (const [threshold, cause] of [
      [10, null],
      // The engine said no threshold (vLLM, or SGLang without priority preemption): slot kept.
      [undefined, "tenant_share"],
    ] as const) {
      const { queue, at, go } = setUp(threshold);
      for (let i = 0; i < 4; i++) await go({ tenant: "A", priority: 0 });
      await go({ tenant: "B", priority: 0 });
      await go({ tenant: "A", priority: 0 });
      await go({ tenant: "A", priority: 0 });
      // 7 of 8 slots taken, A over its share: only the kept slot is free.
      expect(queue.wouldWait(at({ tenant: "A", priority: 0 }))).toBe(cause);
    }
  });

  it("paces the yielding tenant: it goes only where none of this router's prompts waits for a first byte", async () => {
    const { queue, admission, worker, at, go } = setUp(10);
    for (let i = 0; i < 4; i++) await go({ tenant: "A", priority: 0 });
    await go({ tenant: "B", priority: 0 });
    // A holds its share beside B: it yields at an engine that preempts it for B.
    expect(admission.enginePriority(at({ tenant: "A", priority: 0 }))).toBe(-11);
    expect(queue.wouldWait(at({ tenant: "A", priority: 0 }))).toBeNull();
    // One prompt in prefill there: A's next waits for its first byte; B's goes at once.
    worker.pendingPrefillRequests = 1;
    expect(queue.wouldWait(at({ tenant: "A", priority: 0 }))).toBe("tenant_share");
    expect(queue.wouldWait(at({ tenant: "B", priority: 0 }))).toBeNull();
    worker.pendingPrefillRequests = 0;
    expect(queue.wouldWait(at({ tenant: "A", priority: 0 }))).toBeNull();
  });

  it("paces a band the engines preempt for a band active above it, the same tenant's too, into free slots", async () => {
    const { queue, worker, at, go } = setUp(10);
    const low = { tenant: "A", priority: -1 };
    await go(low);
    worker.pendingPrefillRequests = 1;
    // No band above -1 by more than the threshold yet: the flood goes where the depth allows.
    expect(queue.wouldWait(at(low))).toBeNull();
    await go({ tenant: "A", priority: 9 });
    // 9 is within the threshold of -1: the engine would not preempt the flood for it.
    expect(queue.wouldWait(at(low))).toBeNull();
    await go({ tenant: "A", priority: 10 });
    expect(queue.wouldWait(at(low))).toBe("priority_paced");
    expect(queue.wouldWait(at({ tenant: "A", priority: 10 }))).toBeNull();
    worker.pendingPrefillRequests = 0;
    expect(queue.wouldWait(at(low))).toBeNull();
    // Nothing in prefill but no free slot: it would wait in the engine's queue, to start unseen.
    const inFlight = worker.ownInFlight;
    worker.ownInFlight = 8;
    expect(queue.wouldWait(at(low))).toBe("priority_paced");
    worker.ownInFlight = inFlight;
    // An engine that said no threshold does not preempt: nothing to pace for.
    const unsaid = setUp();
    await unsaid.go({ tenant: "A", priority: 10 });
    unsaid.worker.pendingPrefillRequests = 1;
    expect(unsaid.queue.wouldWait(unsaid.at(low))).toBeNull();
  });
});
