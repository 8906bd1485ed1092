/**
 * The reserve rule (admission/tenant-share.ts, --tenant-reserve-slots): while other tenants are
 * active, a tenant holding at least its fair share of the batch slots waits while only the
 * reserved slots are free, so another tenant's request starts at once instead of after an end.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { Admission } from "../../src/admission/admission.js";
import type { AdmissionQueue, AdmissionQueueOptions } from "../../src/admission/admission-queue.js";
import type { AdmissionRelease, AdmissionTicket } from "../../src/admission/step.js";
import { ACTIVE_WINDOW_MS, TenantShares } from "../../src/admission/tenant-share.js";
import { Cancel } from "../../src/proxy/cancel.js";
import type { SaturationView } from "../../src/workers/saturation.js";
import { testQueue } from "../helpers/admission-queue.js";

/** A worker with a said batch cap and no engine reading: its free slots are cap - own in flight. */
class SlotWorker implements SaturationView {
  ownInFlight = 0;
  pendingPrefillRequests = 0;
  visiblePrefillRequests: number | undefined;
  pendingPrefillChars = 0;
  readonly signals: SaturationView["signals"];
  constructor(
    readonly id: string,
    cap: number | undefined,
  ) {
    this.signals = { load: () => undefined, maxRunning: cap };
  }
}

const THRESHOLDS = { queueDepth: 1, kvUsage: 1, pendingPrefillChars: 0 };

/** A request of `tenant` at priority 0 whose candidates are `workers`. */
function ticket(tenant: string, workers: SaturationView[], signal = new Cancel()): AdmissionTicket {
  return {
    identity: () => ({ tenant, priority: 0 }),
    candidates: () => workers,
    cost: () => 100,
    promptChars: () => 400,
    maxTokens: () => undefined,
    timeoutMs: () => 30_000,
    signal,
  };
}

/** The queue with --queue-when-saturated and one slot kept. */
function reserveQueue(options: Partial<AdmissionQueueOptions> = {}): AdmissionQueue {
  return testQueue({
    thresholds: THRESHOLDS,
    queueWhenSaturated: true,
    reserveSlots: 1,
    ...options,
  });
}

describe("TenantShares.heldForOthers", () => {
  it("holds a tenant over its share only while others are active and the reserve is all that is free", () => {
    const workers = [new SlotWorker("w0", 4), new SlotWorker("w1", 4)];
    const shares = new TenantShares(1);
    for (let i = 0; i < 7; i++) shares.started("A");
    workers[0]!.ownInFlight = 4;
    workers[1]!.ownInFlight = 3;
    // Alone: A may fill every slot.
    expect(shares.heldForOthers("A", workers, 0)).toBe(false);
    shares.seen("B", 0);
    expect(shares.heldForOthers("A", workers, 1)).toBe(true);
    // B under its share (4 of 8) is never held by the rule.
    expect(shares.heldForOthers("B", workers, 1)).toBe(false);
    // Two free: A may take one, one stays.
    workers[0]!.ownInFlight = 3;
    expect(shares.heldForOthers("A", workers, 1)).toBe(false);
    workers[0]!.ownInFlight = 4;
    // B idle past the window, nothing of it waiting or in flight: not active.
    expect(shares.heldForOthers("A", workers, ACTIVE_WINDOW_MS)).toBe(false);
    shares.queued("B", 1);
    expect(shares.heldForOthers("A", workers, ACTIVE_WINDOW_MS)).toBe(true);
    shares.started("B");
    expect(shares.heldForOthers("A", workers, ACTIVE_WINDOW_MS)).toBe(true);
  });

  it("counts the share over the active tenants, and guesses nothing when a cap is unknown", () => {
    const workers = [new SlotWorker("w0", 4), new SlotWorker("w1", 4)];
    const shares = new TenantShares(1);
    for (const t of ["B", "C", "D"]) shares.seen(t, 0);
    // Share 8 / 4 = 2: A at 1 goes even into the last free slot.
    shares.started("A");
    workers[0]!.ownInFlight = 4;
    workers[1]!.ownInFlight = 3;
    expect(shares.heldForOthers("A", workers, 1)).toBe(false);
    shares.started("A");
    expect(shares.heldForOthers("A", workers, 1)).toBe(true);
    expect(shares.heldForOthers("A", [...workers, new SlotWorker("vllm", undefined)], 1)).toBe(
      false,
    );
    expect(new TenantShares(0).heldForOthers("A", workers, 1)).toBe(false);
  });
});

describe("TenantShares.noFreeSlot (the release rule while tenants share the slots)", () => {
  it("holds any tenant's request while no slot is free and others are active; never alone, nor with a cap unknown", () => {
    const workers = [new SlotWorker("w0", 2), new SlotWorker("w1", 2)];
    const shares = new TenantShares(1);
    workers[0]!.ownInFlight = 2;
    workers[1]!.ownInFlight = 2;
    // Alone: the depth decides (a full batch may still take a queued request at depth 1).
    expect(shares.noFreeSlot("B", workers, 0)).toBe(false);
    shares.seen("A", 0);
    expect(shares.noFreeSlot("B", workers, 1)).toBe(true);
    workers[1]!.ownInFlight = 1;
    expect(shares.noFreeSlot("B", workers, 1)).toBe(false);
    workers[1]!.ownInFlight = 2;
    expect(shares.noFreeSlot("B", [...workers, new SlotWorker("vllm", undefined)], 1)).toBe(false);
    expect(new TenantShares(0).noFreeSlot("B", workers, 1)).toBe(false);
  });
});

describe("AdmissionQueue with --tenant-reserve-slots", () => {
  it("keeps a free slot for a light tenant while a flood waits, and gives the flood the slot back once it is idle", async () => {
    let now = 1_000;
    const q = reserveQueue({ recheckMs: 2, now: () => now });
    const workers = [new SlotWorker("w0", 4), new SlotWorker("w1", 4)];
    /** Admitted requests as the forwarder would place them: into a free slot. */
    const dispatch = (release: AdmissionRelease) => {
      const w = workers.reduce((a, b) => (b.ownInFlight < a.ownInFlight ? b : a));
      w.ownInFlight += 1;
      return () => {
        w.ownInFlight -= 1;
        release();
      };
    };
    const go = async (tenant: string, signal?: Cancel) => {
      const entered = q.enter(ticket(tenant, workers, signal));
      return dispatch(typeof entered === "function" ? entered : await entered);
    };

    // B has been seen: A fills 7 of the 8 slots at once, and its 8th waits.
    (await go("B"))();
    const flood = [];
    for (let i = 0; i < 7; i++) flood.push(await go("A"));
    expect(q.waiting).toBe(0);
    expect(q.wouldWait(ticket("A", workers))).toBe("tenant_share");
    expect(q.wouldWait(ticket("B", workers))).toBeNull();
    let eighthIn = false;
    const eighth = go("A").then((end) => {
      eighthIn = true;
      return end;
    });
    expect(q.waiting).toBe(1);
    expect(q.wouldWait(ticket("A", workers))).toBe("queue_not_empty");

    // B's next request takes the kept slot at once, ahead of the waiting flood.
    const light = await go("B");
    expect(q.waiting).toBe(1);
    expect(workers.reduce((s, w) => s + w.ownInFlight, 0)).toBe(8);

    // One end of the flood frees a slot, which is kept; a second lets A's waiting request go.
    flood.pop()?.();
    await new Promise((r) => setTimeout(r, 10));
    expect(eighthIn).toBe(false);
    light();
    const end = await eighth;
    expect(q.waiting).toBe(0);

    // B idle past the window: A fills every slot.
    now += ACTIVE_WINDOW_MS;
    flood.push(end, await go("A"));
    expect(workers.reduce((s, w) => s + w.ownInFlight, 0)).toBe(8);
    for (const f of flood) f();
    expect(q.running).toBe(0);
  });
});

describe("the reserve's pace (--tenant-reserve-pace)", () => {
  function setup(reservePace?: boolean) {
    let now = 1_000;
    const queue = reserveQueue({
      ...(reservePace === undefined ? {} : { reservePace }),
      now: () => now,
    });
    const workers = [new SlotWorker("w0", 4), new SlotWorker("w1", 4)];
    const at = (tenant: string) => ticket(tenant, workers);
    // A holds 4 of the 8 slots: its share once B is active.
    for (let i = 0; i < 4; i++) expect(typeof queue.enter(at("A"))).toBe("function");
    workers[0]!.ownInFlight = 2;
    workers[1]!.ownInFlight = 2;
    const light = queue.enter(at("B")) as AdmissionRelease;
    workers[1]!.ownInFlight = 3;
    const admission = new Admission(queue, THRESHOLDS, true);
    /** B's request ends and B stays quiet past the window. */
    const bGone = () => {
      light();
      workers[1]!.ownInFlight = 2;
      now += ACTIVE_WINDOW_MS;
    };
    return { queue, workers, at, admission, bGone };
  }

  it("lets a tenant over its share go only into a free slot of a worker with none of this router's prompts in prefill", () => {
    const { queue, workers, at } = setup();
    // Three slots free, both workers' prefill idle: A goes.
    expect(queue.wouldWait(at("A"))).toBeNull();
    // w0 has a prompt in prefill; w1, idle, still has a free slot.
    workers[0]!.pendingPrefillRequests = 1;
    expect(queue.wouldWait(at("A"))).toBeNull();
    // w1 idle but full: the free slots beyond the reserve are all on w0, whose prefill is busy.
    workers[1]!.ownInFlight = 4;
    expect(queue.wouldWait(at("A"))).toBe("tenant_share");
    // B, under its share, is never paced.
    expect(queue.wouldWait(at("B"))).toBeNull();
    // w0's request is a non-streaming one: its first byte comes only with its end, so it does
    // not count (it would hold A until then).
    workers[0]!.visiblePrefillRequests = 0;
    expect(queue.wouldWait(at("A"))).toBeNull();
    // A stream's prompt there: paced again until its first byte.
    workers[0]!.visiblePrefillRequests = 1;
    expect(queue.wouldWait(at("A"))).toBe("tenant_share");
    workers[0]!.visiblePrefillRequests = 0;
    workers[0]!.pendingPrefillRequests = 0;
    expect(queue.wouldWait(at("A"))).toBeNull();
  });

  it("places the paced tenant on the worker whose prefill is idle", () => {
    const { workers, at, admission } = setup();
    workers[0]!.pendingPrefillRequests = 1;
    const room = admission.roomFor(at("A"), undefined);
    expect([room?.(workers[0]!), room?.(workers[1]!)]).toEqual([false, true]);
    // B goes to either free slot.
    const light = admission.roomFor(at("B"), undefined);
    expect([light?.(workers[0]!), light?.(workers[1]!)]).toEqual([true, true]);
  });

  it("paces nobody with --tenant-reserve-pace false, nor a tenant alone", () => {
    const off = setup(false);
    off.workers[0]!.pendingPrefillRequests = 1;
    off.workers[1]!.ownInFlight = 4;
    expect(off.queue.wouldWait(off.at("A"))).toBeNull();
    const alone = setup();
    alone.bGone();
    alone.workers[0]!.pendingPrefillRequests = 1;
    alone.workers[1]!.ownInFlight = 4;
    expect(alone.queue.wouldWait(alone.at("A"))).toBeNull();
  });
});

describe("Admission.roomFor: into a free slot when there is one", () => {
  it("prefers, while tenants share the slots, a worker with a free slot over one whose full batch only counts as room at depth 1", () => {
    const queue = reserveQueue();
    const admission = new Admission(queue, THRESHOLDS, true);
    const [full, open] = [new SlotWorker("full", 2), new SlotWorker("open", 2)];
    full.ownInFlight = 2;
    open.ownInFlight = 1;
    const request = ticket("B", [full, open]);
    // Alone, the tenant routes as before: both have room at depth 1.
    const alone = admission.roomFor(request, undefined);
    expect([alone?.(full), alone?.(open)]).toEqual([true, true]);
    // Another tenant asked just now: into the free slot.
    const other = queue.enter(ticket("other", [full, open]));
    expect(typeof other).toBe("function");
    (other as AdmissionRelease)();
    const room = admission.roomFor(request, undefined);
    expect([room?.(full), room?.(open)]).toEqual([false, true]);
    // No free slot anywhere: room is where the engine queue is under --saturation-queue-depth.
    open.ownInFlight = 2;
    const none = admission.roomFor(request, undefined);
    expect([none?.(full), none?.(open)]).toEqual([true, true]);
  });
});

describe("TenantShares counts the active tenants as they change", () => {
  /** The rule as first written: every tenant's state looked at on each question. */
  interface Naive {
    inFlight: number;
    waiting: number;
    lastSeen: number;
  }
  const naiveOthers = (model: Map<string, Naive>, tenant: string, now: number) =>
    [...model].filter(
      ([name, u]) =>
        name !== tenant && (u.inFlight > 0 || u.waiting > 0 || now - u.lastSeen < ACTIVE_WINDOW_MS),
    ).length;

  it("agrees with a recount over every tenant after any sequence of asks, starts, ends, waits and forgets", () => {
    const tenants = ["A", "B", "C", "D"];
    const op = fc.record({
      kind: fc.constantFrom("seen", "started", "ended", "queued", "unqueued", "forget"),
      tenant: fc.constantFrom(...tenants),
      advance: fc.integer({ min: 0, max: 1500 }),
    });
    fc.assert(
      fc.property(fc.array(op, { maxLength: 60 }), (ops) => {
        const shares = new TenantShares(1);
        const model = new Map<string, Naive>();
        const use = (t: string) => {
          let u = model.get(t);
          if (u === undefined) {
            u = { inFlight: 0, waiting: 0, lastSeen: Number.NEGATIVE_INFINITY };
            model.set(t, u);
          }
          return u;
        };
        let now = 0;
        for (const { kind, tenant, advance } of ops) {
          now += advance;
          const u = use(tenant);
          if (kind === "seen") {
            shares.seen(tenant, now, 0);
            u.lastSeen = now;
          } else if (kind === "started") {
            shares.started(tenant);
            u.inFlight += 1;
          } else if (kind === "ended") {
            shares.ended(tenant);
            u.inFlight = Math.max(0, u.inFlight - 1);
          } else if (kind === "queued") {
            shares.queued(tenant, 1);
            u.waiting += 1;
          } else if (kind === "unqueued") {
            if (u.waiting === 0) continue;
            shares.queued(tenant, -1);
            u.waiting -= 1;
          } else {
            shares.forget(tenant);
            model.delete(tenant);
          }
          for (const t of tenants) {
            expect(shares.othersActive(t, now)).toBe(naiveOthers(model, t, now));
          }
        }
      }),
      { numRuns: 200 },
    );
  });
});

describe("TenantShares.yieldsAtEngine (--engine-priority)", () => {
  it("yields while over its share with another tenant at the same priority, and stays low while its yielded work runs", () => {
    const workers = [new SlotWorker("w0", 4), new SlotWorker("w1", 4)];
    const shares = new TenantShares(1);
    shares.seen("A", 0, 0);
    for (let i = 0; i < 5; i++) shares.started("A");
    // Alone at priority 0: keeps it, however much it holds.
    expect(shares.yieldsAtEngine("A", 0, workers, 1)).toBe(false);
    // B asks at 10: not A's band.
    shares.seen("B", 1, 10);
    expect(shares.yieldsAtEngine("A", 0, workers, 1)).toBe(false);
    // B asks at 0: A holds 5 of 8 slots, over its share of 4.
    shares.seen("B", 2, 0);
    expect(shares.yieldsAtEngine("A", 0, workers, 3)).toBe(true);
    expect(shares.yieldsAtEngine("B", 0, workers, 3)).toBe(false);
    // Unknown cap: nothing guessed.
    expect(shares.yieldsAtEngine("A", 0, [new SlotWorker("vllm", undefined)], 3)).toBeUndefined();
    // A yielded; B gone quiet past the window: A stays low while that work runs...
    shares.yielding("A", 0);
    expect(shares.yieldsAtEngine("A", 0, workers, 3 + ACTIVE_WINDOW_MS)).toBe(true);
    expect(shares.yieldsAtEngine("A", 10, workers, 3 + ACTIVE_WINDOW_MS)).toBe(false);
    // ...and returns to its priority once none of it is in flight.
    for (let i = 0; i < 5; i++) shares.ended("A");
    expect(shares.yieldingAt("A", 0)).toBe(false);
    expect(shares.yieldsAtEngine("A", 0, workers, 3 + ACTIVE_WINDOW_MS)).toBe(false);
  });
});
