/**
 * --engine-priority with --queue-when-saturated (issue 24): a request that outranks the work
 * filling a saturated engine goes at once, without waiting for an end, because the engine's
 * priority scheduler serves it first (the simulated engine preempts). Real sockets, a simulated
 * SGLang engine with a batch of 2 and priority scheduling, kept busy by long low-priority
 * streams; engine readings are taken by hand (the poll interval is a minute). The engines run
 * with --priority-scheduling-preemption-threshold 0, as an operator who wants every higher
 * priority to preempt sets it (SGLang's default, 10, preempts only for a gap above 10).
 */
import { describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import type { RunningRouter } from "../../src/server.js";
import { startedPerTest } from "../faults/support.js";
import { HOLD_AT_FULL_BATCH } from "../helpers/admission-settings.js";
import { startTestRouter, waitFor } from "../helpers/router.js";

const FLOOD = { "x-tenant-id": "flood", "x-priority": "0" };
const HIGH = { "x-tenant-id": "urgent", "x-priority": "10" };
const SAME = { "x-tenant-id": "light", "x-priority": "0" };
/** SGLang with priority scheduling, preempting for any higher priority. */
const PREEMPTING = {
  maxRunning: 2,
  priorityScheduling: true,
  prioritySchedulingPreemptionThreshold: 0,
};

function complete(
  router: RunningRouter,
  headers: Record<string, string>,
  prompt: string,
  maxTokens: number,
  signal: AbortSignal,
  stream = false,
): Promise<Response> {
  return fetch(`${router.url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify({ model: "m", prompt, max_tokens: maxTokens, stream }),
    signal,
  });
}

/** A long stream whose end is far away: `ended` says whether it came. */
function longStream(
  router: RunningRouter,
  name: string,
  signal: AbortSignal,
  headers: Record<string, string> = FLOOD,
) {
  const state = { ended: false };
  const done = complete(router, headers, `flood ${name}`, 100_000, signal, true)
    .then((r) => r.text())
    .catch(() => undefined)
    .finally(() => {
      state.ended = true;
    });
  return { state, done };
}

/** The promise's value, or a failure after `ms`. */
function within<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

async function explain(router: RunningRouter, headers: Record<string, string>) {
  const res = await fetch(`${router.url}/debug/route/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify({ model: "m", prompt: "would I wait?" }),
  });
  return (
    (await res.json()) as {
      admission: {
        would_queue: boolean;
        cause: string | null;
        engine_priority: number | null;
        outranks_running_work_on: string[];
      };
    }
  ).admission;
}

describe("--engine-priority: a request that outranks the running work goes at once", () => {
  const started = startedPerTest();

  /** An engine full of long low-priority streams (2 running, 1 queued), read by the router. */
  async function floodedFleet(enginePriority: boolean, signal: AbortSignal) {
    const sim = await startSimWorker({ id: "busy", ...PREEMPTING });
    started.sims = [sim];
    started.router = await startTestRouter({
      workerUrls: [sim.url],
      enginePriority,
      ...HOLD_AT_FULL_BATCH,
    });
    const router = started.router;
    const worker = router.context.registry.get(sim.url)!;
    await waitFor(() => worker.signals.engine === "sglang", 5000, "engine kind read");
    const flood = ["a", "b", "c"].map((name) => longStream(router, name, signal));
    await waitFor(
      () => sim.stats().running === 2 && sim.stats().waiting === 1,
      5000,
      "the engine full and queueing",
    );
    // A reading with the batch full and one queued: saturated (queue 1 ≥ depth 1), batch 2 learned.
    await router.context.introspection.pollAll();
    return { sim, router, worker, flood };
  }

  it("releases a higher-priority request at once, served by the engine before the running work; same priority waits", async () => {
    const stop = new AbortController();
    try {
      const { sim, router, worker, flood } = await floodedFleet(true, stop.signal);
      const admission = router.context.admission;
      // A fourth flood request and a same-priority one from another tenant are held.
      const held = [
        complete(router, FLOOD, "flood d", 4, stop.signal).catch(() => undefined),
        complete(router, SAME, "same priority", 4, stop.signal).catch(() => undefined),
      ];
      await waitFor(() => admission.waiting === 2, 5000, "two requests held");
      const before = sim.stats().requests;

      // Before the change it waited for a flood stream's end, minutes away: bounded here.
      const high = await within(complete(router, HIGH, "urgent one", 4, stop.signal), 10_000);
      expect(high.status).toBe(200);
      await high.text();
      // Served while every flood stream still runs (none ended): the engine preempted for it.
      expect(flood.map((f) => f.state.ended)).toEqual([false, false, false]);
      expect(sim.stats().requests).toBe(before + 1);
      // The same-priority requests still wait: they outrank nothing running.
      expect(admission.waiting).toBe(2);
      expect(worker.toJSON()).toMatchObject({
        in_flight_by_engine_priority: [{ priority: 0, requests: 3 }],
      });
      // Every client goes: the tally empties with the leases (client gone mid-stream or queued).
      stop.abort();
      await Promise.all([...held, ...flood.map((f) => f.done)]);
      await waitFor(() => worker.ownInFlight === 0, 5000, "every lease ended");
      expect(worker.ownInFlightBelow(101)).toBe(0);
      expect(worker.toJSON()).not.toHaveProperty("in_flight_by_engine_priority");
    } finally {
      stop.abort();
    }
  }, 30_000);

  it("/debug/route says the higher-priority request goes because it outranks the running work", async () => {
    const stop = new AbortController();
    try {
      const { router, worker } = await floodedFleet(true, stop.signal);
      expect(await explain(router, HIGH)).toMatchObject({
        would_queue: false,
        cause: null,
        engine_priority: 10,
        outranks_running_work_on: [worker.id],
      });
      expect(await explain(router, SAME)).toMatchObject({
        would_queue: true,
        cause: "fleet_saturated",
        engine_priority: 0,
        outranks_running_work_on: [],
      });
    } finally {
      stop.abort();
    }
  }, 30_000);

  it("routes the released request to the worker where it outranks the work, not where it would wait", async () => {
    const stop = new AbortController();
    try {
      const sims = [
        await startSimWorker({ id: "x", ...PREEMPTING }),
        await startSimWorker({ id: "y", ...PREEMPTING }),
      ];
      started.sims = sims;
      const [x, y] = sims as [SimWorker, SimWorker];
      // Each stream placed by its header; the middle one, without it, goes where it has room.
      started.router = await startTestRouter({
        workerUrls: [x.url, y.url],
        policy: "consistent_hashing",
        enginePriority: true,
        ...HOLD_AT_FULL_BATCH,
      });
      const router = started.router;
      const workers = sims.map((sim) => router.context.registry.get(sim.url)!);
      await waitFor(
        () => workers.every((w) => w.signals.engine === "sglang"),
        5000,
        "engine kinds read",
      );
      // One at a time: y gets three streams of priority 0, then x three of priority 10 (in that
      // order: with priority 10 asking, the engines preempting past 0, a priority-0 request is
      // paced and would not be let into y's queue).
      for (let i = 0; i < 6; i++) {
        const sim = i < 3 ? y : x;
        const sent = sim.stats().requests;
        const priority = i < 3 ? "0" : "10";
        const target = workers[sims.indexOf(sim)]!.id;
        void longStream(router, `${i}`, stop.signal, {
          "x-priority": priority,
          "x-smg-target-worker": target,
        });
        await waitFor(() => sim.stats().requests === sent + 1, 5000, `stream ${i} at ${sim.url}`);
      }
      await waitFor(
        () => sims.every((sim) => sim.stats().running === 2 && sim.stats().waiting === 1),
        5000,
        "both engines full and queueing",
      );
      await router.context.introspection.pollAll();
      const atY = y.stats().requests;

      const middle = await within(
        complete(router, { "x-priority": "5" }, "middle one", 4, stop.signal),
        10_000,
      );
      expect(middle.status).toBe(200);
      await middle.text();
      // It went to y, whose running work it outranks; at x it would wait behind priority 10.
      expect(y.stats().requests).toBe(atY + 1);
      expect(x.stats().requests).toBe(3);
    } finally {
      stop.abort();
    }
  }, 30_000);

  it("at SGLang's default threshold (10), a light tenant's request preempts the flood of a tenant over its share", async () => {
    const stop = new AbortController();
    try {
      // SGLang's default threshold: a gap of one (the old demotion) preempted nothing.
      const sim = await startSimWorker({ id: "busy", maxRunning: 2, priorityScheduling: true });
      started.sims = [sim];
      started.router = await startTestRouter({
        workerUrls: [sim.url],
        enginePriority: true,
        ...HOLD_AT_FULL_BATCH,
        // No slot kept: the flood fills the batch, and only preemption lets the light one in.
        tenantReserveSlots: 0,
      });
      const router = started.router;
      const worker = router.context.registry.get(sim.url)!;
      await waitFor(
        () => worker.signals.engine === "sglang" && worker.signals.maxRunning === 2,
        5000,
        "engine kind and batch cap read",
      );
      // The light tenant asked just now at priority 0.
      const first = await within(complete(router, SAME, "light first", 2, stop.signal), 10_000);
      expect(first.status).toBe(200);
      await first.text();
      // The flood's tenant holds its share (1 of 2 slots) at once: its streams go 11 lower.
      const flood = ["a", "b"].map((name) => longStream(router, name, stop.signal));
      await waitFor(() => sim.stats().running === 2, 5000, "the batch full of the flood");
      expect(worker.toJSON()).toMatchObject({
        in_flight_by_engine_priority: [{ priority: -11, requests: 2 }],
      });
      // Before, it waited at the head of the engine's queue for a flood stream's end.
      const light = await within(complete(router, SAME, "light again", 4, stop.signal), 10_000);
      expect(light.status).toBe(200);
      await light.text();
      expect(flood.map((f) => f.state.ended)).toEqual([false, false]);
      stop.abort();
      await Promise.all(flood.map((f) => f.done));
    } finally {
      stop.abort();
    }
  }, 30_000);

  it("without --engine-priority the higher-priority request waits for an end, as before", async () => {
    const stop = new AbortController();
    try {
      const { sim, router } = await floodedFleet(false, stop.signal);
      const admission = router.context.admission;
      expect(await explain(router, HIGH)).toMatchObject({
        would_queue: true,
        cause: "fleet_saturated",
      });
      const before = sim.stats().requests;
      const high = complete(router, HIGH, "urgent one", 4, stop.signal).catch(() => undefined);
      await waitFor(() => admission.waiting === 1, 5000, "the high request held");
      // Many queue rechecks (every 20 ms) later it is still held: no flood stream has ended.
      await new Promise((r) => setTimeout(r, 300));
      expect(admission.waiting).toBe(1);
      expect(sim.stats().requests).toBe(before);
      void high;
    } finally {
      stop.abort();
    }
  }, 30_000);
});
