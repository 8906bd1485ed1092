import { describe, expect, it } from "vitest";
import { Admission } from "../../src/admission/admission.js";
import { AdmissionQueue } from "../../src/admission/admission-queue.js";
import type { RequestIdentity } from "../../src/admission/identity.js";
import type { AdmissionTicket } from "../../src/admission/step.js";
import { Cancel } from "../../src/proxy/cancel.js";

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

describe("Admission.enginePriority (--engine-priority)", () => {
  it("is the request's priority, one step lower while its tenant holds over half the waiting at that priority", async () => {
    const queue = new AdmissionQueue({
      maxConcurrent: 1,
      queueSize: 100,
      maxQueuedPerTenant: 100,
      queueWhenSaturated: false,
      thresholds: THRESHOLDS,
      recheckMs: 5,
    });
    const admission = new Admission(queue, THRESHOLDS, false);
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
