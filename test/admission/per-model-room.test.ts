import { describe, expect, it } from "vitest";
import type { AdmissionQueue } from "../../src/admission/admission-queue.js";
import type { AdmissionRelease, AdmissionTicket } from "../../src/admission/step.js";
import { Cancel } from "../../src/proxy/cancel.js";
import type { SaturationView } from "../../src/workers/saturation.js";
import { testQueue } from "../helpers/admission-queue.js";
import { FakeWorker } from "../helpers/saturation-worker.js";

const THRESHOLDS = { queueDepth: 5, kvUsage: 0.9, pendingPrefillChars: 0 };

function ticket(
  workers: SaturationView[],
  timeoutMs: number,
  signal = new Cancel(),
): AdmissionTicket {
  return {
    identity: () => ({ tenant: "default", priority: 0 }),
    candidates: () => workers,
    cost: () => 100,
    promptChars: () => 400,
    maxTokens: () => undefined,
    timeoutMs: () => timeoutMs,
    signal,
  };
}

/** A queue that holds requests while their workers are saturated, looking again every `recheckMs`. */
function saturationQueue(recheckMs: number): AdmissionQueue {
  return testQueue({ thresholds: THRESHOLDS, queueWhenSaturated: true, recheckMs });
}

/** A saturated worker of model-x and an idle one of model-y. */
function busyAndIdle(): { busy: FakeWorker; idle: FakeWorker } {
  const busy = new FakeWorker("model-x");
  const idle = new FakeWorker("model-y");
  busy.report(10);
  idle.report(0);
  return { busy, idle };
}

describe("AdmissionQueue: room per model (--queue-when-saturated)", () => {
  it("a request whose workers have room goes while the head's workers are saturated", async () => {
    const q = saturationQueue(5);
    const { busy, idle } = busyAndIdle();
    const cancel = new Cancel();
    const blocked = q.enter(ticket([busy], 30_000, cancel));
    expect(q.waiting).toBe(1);
    // Before the fix, this one waited behind the head until its deadline (a 429 queue_timeout).
    const entered = q.enter(ticket([idle], 2_000));
    const release = (typeof entered === "function" ? entered : await entered) as AdmissionRelease;
    expect(typeof release).toBe("function");
    expect(q.waiting).toBe(1);
    release();
    cancel.abort();
    await Promise.allSettled([blocked]);
  });
});

describe("AdmissionQueue: one answer per tenant, priority and model a turn", () => {
  it("judges a backlog of interchangeable requests once per turn, not once each", async () => {
    const q = saturationQueue(60_000);
    const busy = new FakeWorker("model-x");
    busy.report(10);
    let asked = 0;
    const cancel = new Cancel();
    const flood = (): AdmissionTicket => ({
      ...ticket([busy], 30_000, cancel),
      roomKey: "model-x",
      candidates: () => {
        asked += 1;
        return [busy];
      },
    });
    const waiting = Array.from({ length: 40 }, () => q.enter(flood()));
    await new Promise((r) => setImmediate(r));
    expect(q.waiting).toBe(40);
    asked = 0;
    // One more arrives: the turn it starts looks at every waiting request (up to 64) for room.
    waiting.push(q.enter(flood()));
    await new Promise((r) => setImmediate(r));
    expect(q.waiting).toBe(41);
    // Every one is the same tenant's, priority and model: its saturated workers asked once.
    expect(asked).toBe(1);
    cancel.abort();
    await Promise.allSettled(waiting);
  });
});

describe("AdmissionQueue: a request above everything waiting", () => {
  it("goes at once when it has room (it overtakes nobody); one of a waiting priority waits its turn", async () => {
    const q = saturationQueue(60_000);
    const { busy, idle } = busyAndIdle();
    const cancel = new Cancel();
    const low = q.enter(ticket([busy], 30_000, cancel));
    expect(q.waiting).toBe(1);
    const at = (priority: number): AdmissionTicket => ({
      ...ticket([idle], 30_000, cancel),
      identity: () => ({ tenant: "default", priority }),
    });
    // Above the waiting band, with room: released in this call, not a turn of the queue later.
    const high = q.enter(at(10));
    expect(typeof high).toBe("function");
    // The waiting band's own priority waits for the queue's turn (then goes: its workers have room).
    const same = q.enter(at(0));
    expect(typeof same).not.toBe("function");
    expect(typeof (await same)).toBe("function");
    cancel.abort();
    await Promise.allSettled([low]);
  });
});
