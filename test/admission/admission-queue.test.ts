import { describe, expect, it } from "vitest";
import type { AdmissionQueue, AdmissionQueueOptions } from "../../src/admission/admission-queue.js";
import type { RequestIdentity } from "../../src/admission/identity.js";
import type { AdmissionRelease, AdmissionTicket } from "../../src/admission/step.js";
import { RouterError } from "../../src/errors.js";
import { Cancel } from "../../src/proxy/cancel.js";
import type { SaturationView } from "../../src/workers/saturation.js";
import { testQueue } from "../helpers/admission-queue.js";
import { FakeWorker } from "../helpers/saturation-worker.js";

const THRESHOLDS = { queueDepth: 5, kvUsage: 0.9, pendingPrefillChars: 0 };

function queueOf(options: Partial<AdmissionQueueOptions> = {}): AdmissionQueue {
  return testQueue({ thresholds: THRESHOLDS, recheckMs: 5, ...options });
}

function ticket(
  identity: Partial<RequestIdentity> = {},
  extra: { workers?: SaturationView[]; signal?: Cancel; timeoutMs?: number; cost?: number } = {},
): AdmissionTicket {
  return {
    identity: () => ({ tenant: "default", priority: 0, ...identity }),
    candidates: () => extra.workers ?? [],
    cost: () => extra.cost ?? 100,
    promptChars: () => 400,
    maxTokens: () => undefined,
    timeoutMs: () => extra.timeoutMs ?? 10_000,
    signal: extra.signal ?? new Cancel(),
  };
}

async function admitted(entered: AdmissionRelease | Promise<AdmissionRelease>) {
  return typeof entered === "function" ? entered : await entered;
}

describe("AdmissionQueue: --max-concurrent-requests", () => {
  it("is a no-op when disabled", async () => {
    const q = queueOf();
    expect(q.enabled).toBe(false);
    for (let i = 0; i < 3; i++) expect(typeof q.enter(ticket())).toBe("function");
  });

  it("queues beyond the limit and hands slots over in arrival order within a tenant", async () => {
    const q = queueOf({ maxConcurrent: 1 });
    const first = await admitted(q.enter(ticket()));
    const order: number[] = [];
    const track = (n: number) => (release: AdmissionRelease) => {
      order.push(n);
      return release;
    };
    const second = admitted(q.enter(ticket())).then(track(2));
    const third = admitted(q.enter(ticket())).then(track(3));
    expect(q.waiting).toBe(2);
    first();
    (await second)();
    (await third)();
    expect(order).toEqual([2, 3]);
    expect(q.running).toBe(0);
  });

  it("answers 429 at once when the queue is full", async () => {
    const q = queueOf({ maxConcurrent: 1, queueSize: 1 });
    const release = await admitted(q.enter(ticket()));
    const waiting = admitted(q.enter(ticket()));
    await expect(admitted(q.enter(ticket()))).rejects.toMatchObject({
      code: "too_many_requests",
      status: 429,
    });
    release();
    (await waiting)();
  });

  it("answers 429 queue_timeout with a Retry-After when a request waited past its deadline", async () => {
    const q = queueOf({ maxConcurrent: 1 });
    const release = await admitted(q.enter(ticket()));
    const err = await admitted(q.enter(ticket({}, { timeoutMs: 20 }))).catch((e) => e);
    expect(err).toBeInstanceOf(RouterError);
    expect(err).toMatchObject({ code: "queue_timeout", status: 429 });
    expect(err.retryAfterSecs).toBeGreaterThanOrEqual(1);
    expect(q.waiting).toBe(0);
    release();
    expect(q.running).toBe(0);
  });

  it("a client that leaves while waiting leaves the queue at once", async () => {
    const q = queueOf({ maxConcurrent: 1 });
    const release = await admitted(q.enter(ticket()));
    const client = new Cancel();
    const waiting = admitted(q.enter(ticket({}, { signal: client })));
    expect(q.waiting).toBe(1);
    client.abort();
    expect(q.waiting).toBe(0);
    await expect(waiting).rejects.toThrow(/client disconnected/);
    release();
    expect(q.running).toBe(0);
  });

  it("releasing twice does not free two slots", async () => {
    const q = queueOf({ maxConcurrent: 1 });
    const release = await admitted(q.enter(ticket()));
    release();
    release();
    expect(q.running).toBe(0);
    await admitted(q.enter(ticket()));
    expect(q.running).toBe(1);
  });
});

describe("AdmissionQueue: priority, fairness and bounds", () => {
  it("lets the highest priority go first, then tenants by their share", async () => {
    const q = queueOf({ maxConcurrent: 1 });
    const hold = await admitted(q.enter(ticket()));
    const order: string[] = [];
    const go = (name: string, identity: Partial<RequestIdentity>) =>
      admitted(q.enter(ticket(identity))).then((release) => {
        order.push(name);
        release();
      });
    const all = [
      go("low", { priority: -5 }),
      go("a1", { tenant: "a" }),
      go("a2", { tenant: "a" }),
      go("b1", { tenant: "b" }),
      go("high", { priority: 9 }),
    ];
    hold();
    await Promise.all(all);
    // a and b tie on service: b, with fewer waiting, first (fair-queue.ts `before`).
    expect(order).toEqual(["high", "b1", "a1", "a2", "low"]);
  });

  it("a full queue sheds its lowest priority for a higher newcomer, with 429 and Retry-After", async () => {
    const q = queueOf({ maxConcurrent: 1, queueSize: 2 });
    const hold = await admitted(q.enter(ticket()));
    const low = admitted(q.enter(ticket({ priority: -1 }))).catch((e) => e);
    const mid = admitted(q.enter(ticket({ priority: 0 })));
    const high = admitted(q.enter(ticket({ priority: 1 })));
    const shed = await low;
    expect(shed).toMatchObject({ code: "too_many_requests", status: 429 });
    expect(shed.retryAfterSecs).toBeGreaterThanOrEqual(1);
    // A newcomer below everyone waiting is the one refused.
    await expect(admitted(q.enter(ticket({ priority: -3 })))).rejects.toMatchObject({
      code: "too_many_requests",
    });
    hold();
    (await high)();
    (await mid)();
  });

  it("bounds each tenant's waiting requests (--max-queued-per-tenant), not the others'", async () => {
    const q = queueOf({ maxConcurrent: 1, maxQueuedPerTenant: 2 });
    const hold = await admitted(q.enter(ticket()));
    const a = [
      admitted(q.enter(ticket({ tenant: "a" }))),
      admitted(q.enter(ticket({ tenant: "a" }))),
    ];
    await expect(admitted(q.enter(ticket({ tenant: "a" })))).rejects.toMatchObject({
      code: "too_many_requests",
      message: expect.stringContaining("--max-queued-per-tenant"),
    });
    const b = admitted(q.enter(ticket({ tenant: "b" })));
    expect(q.waiting).toBe(3);
    hold();
    await Promise.all([...a, b].map((r) => r.then((release) => release())));
  });
});

describe("AdmissionQueue: --queue-when-saturated", () => {
  it("holds requests while every candidate is saturated and lets them go when one has room", async () => {
    const q = queueOf({ queueWhenSaturated: true });
    const w1 = new FakeWorker("w1");
    const w2 = new FakeWorker("w2");
    w1.report(9);
    w2.report(1);
    // One worker with room: no wait.
    expect(typeof q.enter(ticket({}, { workers: [w1, w2] }))).toBe("function");
    w2.report(7);
    expect(q.wouldWait(ticket({}, { workers: [w1, w2] }))).toBe("fleet_saturated");
    let went = false;
    const waiting = admitted(q.enter(ticket({}, { workers: [w1, w2] }))).then((r) => {
      went = true;
      return r;
    });
    await new Promise((r) => setTimeout(r, 30));
    expect(went).toBe(false);
    expect(q.waiting).toBe(1);
    // The engine's next reading shows room: the recheck lets the request go.
    w2.report(0);
    (await waiting)();
    expect(went).toBe(true);
    expect(q.waiting).toBe(0);
  });

  it("counts its own releases: each released request joins the estimate before the next goes", async () => {
    const q = queueOf({ queueWhenSaturated: true });
    const w = new FakeWorker("w");
    w.report(5);
    const entered = Array.from({ length: 6 }, () =>
      admitted(q.enter(ticket({}, { workers: [w] }))).then((release) => {
        // As the forwarder's dispatch does: the request waits at the engine without a first byte.
        w.pendingPrefillRequests += 1;
        return release;
      }),
    );
    expect(q.waiting).toBe(6);
    w.report(2); // room for 3 before the queue estimate is back at 5
    await new Promise((r) => setTimeout(r, 60));
    expect(w.pendingPrefillRequests).toBe(3);
    expect(q.waiting).toBe(3);
    w.pendingPrefillRequests = 0;
    w.report(0);
    for (const r of entered) (await r)();
  });
});
