/**
 * Admission's slot accounting against the simulator (workers/saturation.ts freeSlots): each
 * worker's free batch slots are its cap minus this router's requests there (exact: dispatch, and
 * the end of the attempt whatever ends it) minus the others' work the last reading showed. They
 * must come back to the engine's truth (cap - running - waiting) after completions, errors,
 * client disconnects and traffic that bypasses the router; a held request goes only into a free
 * slot, so nothing waits in the engine's first-come queue.
 */
import { describe, expect, it } from "vitest";
import { type SimWorker, type SimWorkerOptions, startSimWorker } from "../../sim/worker.js";
import type { ConfigOverrides } from "../../src/config.js";
import type { RunningRouter } from "../../src/server.js";
import { freeSlots, fullBatchOf } from "../../src/workers/saturation.js";
import type { Worker } from "../../src/workers/worker.js";
import { startedPerTest } from "../faults/support.js";
import { HOLD_AT_FULL_BATCH } from "../helpers/admission-settings.js";
import { startTestRouter, waitFor } from "../helpers/router.js";

const MODEL = "meta-llama/Llama-3.1-8B-Instruct";

/** A long stream (thousands of tokens: it runs until aborted); resolves once its first byte is in. */
async function openStream(
  url: string,
  name: string,
  path = "/v1/completions",
  prompt = `slot ${name}`,
) {
  const abort = new AbortController();
  const res = await fetch(`${url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-tenant-id": name },
    body: JSON.stringify({
      model: MODEL,
      prompt,
      max_tokens: 20_000,
      stream: true,
    }),
    signal: abort.signal,
  });
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  await reader.read();
  return {
    status: res.status,
    close: () => {
      abort.abort();
      reader.cancel().catch(() => {});
    },
  };
}

async function complete(url: string, name: string): Promise<number> {
  const res = await fetch(`${url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: MODEL, prompt: `short ${name}`, max_tokens: 2 }),
  });
  await res.text();
  return res.status;
}

function engineFree(sim: SimWorker, cap: number): number {
  const { running, waiting } = sim.stats();
  return cap - running - waiting;
}

/** The router's one worker, once its first engine reading (the one started with it) is in. */
async function onlyWorker(router: RunningRouter): Promise<Worker> {
  const worker = router.context.registry.list()[0] as Worker;
  await router.context.introspection.pollAll();
  await waitFor(() => worker.signals.load() !== undefined, 5000, "the first reading");
  return worker;
}

describe("slot accounting (--worker-max-running, SGLang's said cap, a vLLM cap learned)", () => {
  const started = startedPerTest();

  /** One simulated engine behind a router that holds requests at its full batch (depth 0). */
  async function holdingAtFullBatch(options: SimWorkerOptions, extra: ConfigOverrides = {}) {
    const sim = await startSimWorker(options);
    started.sims = [sim];
    const router = await startTestRouter({
      workerUrls: [sim.url],
      ...HOLD_AT_FULL_BATCH,
      saturationQueueDepth: 0,
      ...extra,
    });
    started.router = router;
    return { sim, router, worker: await onlyWorker(router) };
  }

  it("returns exactly to the engine's free slots after completions, errors, disconnects and bypass traffic", async () => {
    // Live gauges: each reading here is the engine's state at the read (the test after this one
    // has SGLang's own update rule).
    const { sim, router, worker } = await holdingAtFullBatch(
      { id: "slots", maxRunning: 4, decodeLogInterval: 0 },
      { workerMaxRunning: 4, retryMaxAttempts: 1 },
    );
    const free = () => freeSlots(worker, Date.now());
    expect(free()).toBe(4);

    const own = await Promise.all(["a", "b", "c"].map((n) => openStream(router.url, n)));
    expect(free()).toBe(1);
    expect(engineFree(sim, 4)).toBe(1);

    // A client that disconnects gives its slot back at once.
    own[0]?.close();
    await waitFor(() => free() === 2, 5000, "the disconnect's slot");
    await waitFor(() => engineFree(sim, 4) === 2, 5000, "the engine to drop it");

    // An error and a completion leave the count where it was.
    sim.setFaults({ failFirst: 1, failStatus: 500 });
    expect(await complete(router.url, "fails")).toBeGreaterThanOrEqual(500);
    expect(free()).toBe(2);
    expect(await complete(router.url, "ends")).toBe(200);
    expect(free()).toBe(2);

    // A reading after those: the others' work is counted beyond the most of this router's
    // requests since the reading before (the engine may have set its gauges any time after it
    // began), so this router's own change of count since then would hide that many of them.
    await router.context.introspection.pollAll();
    // Traffic straight to the engine is seen at the next reading, and its end too.
    const bypass = await Promise.all(["x", "y"].map((n) => openStream(sim.url, n)));
    expect(free()).toBe(2);
    await router.context.introspection.pollAll();
    expect(free()).toBe(0);
    expect(engineFree(sim, 4)).toBe(0);
    for (const s of bypass) s.close();
    await waitFor(() => engineFree(sim, 4) === 2, 5000, "the engine to drop the bypass");
    await router.context.introspection.pollAll();
    expect(free()).toBe(2);

    for (const s of own) s.close();
    await waitFor(() => free() === 4, 5000, "every slot back");
    await waitFor(() => engineFree(sim, 4) === 4, 5000, "the engine idle");
    await router.context.introspection.pollAll();
    expect(free()).toBe(4);
    expect(worker.toJSON()).toMatchObject({ batch_cap: 4, free_slots: 4 });
  });

  it("takes no ended request of its own for another's work while SGLang's gauges lag (set at a prefill batch, every 40 decode steps, every 30 s idle)", async () => {
    const { sim, router, worker } = await holdingAtFullBatch(
      { id: "lagging", maxRunning: 2 },
      { workerMaxRunning: 2 },
    );
    const free = () => freeSlots(worker, Date.now());
    const own = await Promise.all(["a", "b"].map((n) => openStream(router.url, n)));
    // The batch decodes: the gauges show both running from the 40th decode step on.
    await waitFor(
      async () => {
        await router.context.introspection.pollAll();
        return worker.signals.load(Date.now())?.running === 2;
      },
      5000,
      "a decode update",
    );
    expect(free()).toBe(0);
    for (const s of own) s.close();
    await waitFor(() => sim.stats().running === 0, 5000, "the engine idle");
    // Idle: SGLang sets its gauges again only 30 s later, so the reading still shows both.
    await router.context.introspection.pollAll();
    expect(worker.signals.load(Date.now())?.running).toBe(2);
    // Both ended after the reading before began: counted from the most of this router's since
    // then, the gauges hold nothing of anyone else's. From the read's own span, two phantom
    // requests of others held every slot until the engine's next update.
    expect(free()).toBe(2);
    const next = await openStream(router.url, "c");
    expect(next.status).toBe(200);
    expect(router.context.admission.waiting).toBe(0);
    next.close();
  });

  it("the release rule: a held request goes only into a free slot, so the engine never queues it", async () => {
    const { sim, router, worker } = await holdingAtFullBatch({ id: "release", maxRunning: 2 });
    // SGLang's /get_server_info says the cap (max_running_requests): nothing else is needed.
    expect(fullBatchOf(worker)).toBe(2);
    const full = await Promise.all(["a", "b"].map((n) => openStream(router.url, n)));
    let third: Awaited<ReturnType<typeof openStream>> | undefined;
    const held = openStream(router.url, "c").then((s) => {
      third = s;
      return s;
    });
    await waitFor(() => router.context.admission.waiting === 1, 5000, "the third held");
    expect(sim.stats().waiting + sim.stats().running).toBe(2);
    expect(third).toBeUndefined();
    full[0]?.close();
    const s = await held;
    expect(s.status).toBe(200);
    expect(sim.stats().waiting).toBe(0);
    expect(freeSlots(worker, Date.now())).toBe(0);
    s.close();
    full[1]?.close();
  });

  /**
   * Two engines of a batch of 2 behind a router at the default depth (1) with one slot kept, and
   * a flood of 3 streams while another tenant is active (it asked just now): the flood's share is
   * 4 slots ÷ 2 tenants, so one slot stays free.
   */
  async function floodBesideAnother(extra: ConfigOverrides = {}) {
    const sims = await Promise.all(["r0", "r1"].map((id) => startSimWorker({ id, maxRunning: 2 })));
    started.sims = sims;
    const router = await startTestRouter({
      workerUrls: sims.map((s) => s.url),
      ...HOLD_AT_FULL_BATCH,
      ...extra,
    });
    started.router = router;
    await router.context.introspection.pollAll();
    const workers = router.context.registry.list();
    const free = () => workers.reduce((n, w) => n + (freeSlots(w, Date.now()) ?? 0), 0);
    expect(await complete(router.url, "other")).toBe(200);
    const flood = await Promise.all(["1", "2", "3"].map(() => openStream(router.url, "flood")));
    return { sims, router, free, flood };
  }

  it("keeps a slot free for another tenant while a flooding tenant waits (--tenant-reserve-slots)", async () => {
    const { sims, router, free, flood } = await floodBesideAnother();
    expect(free()).toBe(1);
    let fourthIn = false;
    const fourth = openStream(router.url, "flood").then((s) => {
      fourthIn = true;
      return s;
    });
    await waitFor(() => router.context.admission.waiting === 1, 5000, "the flood's fourth held");
    // The other tenant's stream takes the kept slot at once; no engine queues anything.
    const light = await openStream(router.url, "light");
    expect(light.status).toBe(200);
    expect(sims.map((s) => s.stats().waiting)).toEqual([0, 0]);
    expect(fourthIn).toBe(false);
    light.close();
    const s = await fourth;
    expect(s.status).toBe(200);
    expect(sims.map((x) => x.stats().waiting)).toEqual([0, 0]);
    for (const x of [...flood, s]) x.close();
  });

  /** The flood beside another tenant, one light stream in the kept slot, and a second one sent. */
  async function keptSlotTaken(extra: ConfigOverrides = {}) {
    const { sims, router, free, flood } = await floodBesideAnother(extra);
    const first = await openStream(router.url, "light-1");
    expect(free()).toBe(0);
    let secondIn = false;
    const second = openStream(router.url, "light-2").then((s) => {
      secondIn = true;
      return s;
    });
    return { sims, router, flood, first, second, secondIn: () => secondIn };
  }

  it("holds a light request that finds the kept slot taken for the next slot to free on any engine, not in one engine's queue", async () => {
    // Another light tenant: no slot is free, so it waits here rather than behind the flood in
    // one engine's first-come queue.
    const { sims, router, flood, first, second, secondIn } = await keptSlotTaken();
    await waitFor(() => router.context.admission.waiting === 1, 5000, "the second light held");
    expect(sims.map((x) => x.stats().waiting)).toEqual([0, 0]);
    expect(secondIn()).toBe(false);
    // The first end anywhere is its slot.
    flood[0]?.close();
    const s = await second;
    expect(s.status).toBe(200);
    expect(sims.map((x) => x.stats().waiting)).toEqual([0, 0]);
    for (const x of [...flood.slice(1), first, s]) x.close();
  });

  it("with --hold-for-free-slot false, lets that light request go into one engine's first-come queue (the depth decides)", async () => {
    // At depth 1 a full batch still has room for one queued request: it waits at an engine.
    const { sims, router, flood, first, second, secondIn } = await keptSlotTaken({
      holdForFreeSlot: false,
    });
    await waitFor(
      () => sims.reduce((n, x) => n + x.stats().waiting, 0) === 1,
      5000,
      "the second light queued at an engine",
    );
    expect(router.context.admission.waiting).toBe(0);
    expect(secondIn()).toBe(false);
    flood[0]?.close();
    flood[1]?.close();
    flood[2]?.close();
    const s = await second;
    expect(s.status).toBe(200);
    for (const x of [first, s]) x.close();
  });

  /**
   * One engine of a batch of 8 whose prefill is slow (time scale 5), another tenant active, and
   * four long prompts of a flooding tenant in prefill there (one 8,000-token step: 267 model ms,
   * 1.3 s real); then the flood's fifth, over its share of 8 ÷ 2 with four slots free.
   */
  async function floodInPrefill(extra: ConfigOverrides = {}) {
    const sim = await startSimWorker({ id: "slow", maxRunning: 8, timeScale: 5 });
    started.sims = [sim];
    const router = await startTestRouter({
      workerUrls: [sim.url],
      ...HOLD_AT_FULL_BATCH,
      ...extra,
    });
    started.router = router;
    await router.context.introspection.pollAll();
    expect(await complete(router.url, "other")).toBe(200);
    const before = sim.stats().requests;
    let firstBytes = 0;
    // Distinct from their first character, so none finds another's prefix cached.
    const long = (i: number) => `${i} ${"x".repeat(8000)}`;
    const flood = [0, 1, 2, 3].map((i) =>
      openStream(router.url, "flood", undefined, long(i)).then((s) => {
        firstBytes += 1;
        return s;
      }),
    );
    await waitFor(
      () => sim.stats().requests === before + 4,
      5000,
      "the flood's four at the engine",
    );
    const fifth = openStream(router.url, "flood", undefined, long(4));
    return { sim, router, before, flood, fifth, firstBytes: () => firstBytes };
  }

  it("paces a tenant over its share: its next prompt goes only once the engine's prompts in prefill have their first byte", async () => {
    const { sim, router, before, flood, fifth, firstBytes } = await floodInPrefill();
    await waitFor(() => router.context.admission.waiting === 1, 5000, "the fifth held");
    expect(firstBytes()).toBe(0);
    expect(sim.stats().requests).toBe(before + 4);
    const streams = await Promise.all(flood);
    const s = await fifth;
    expect(s.status).toBe(200);
    for (const x of [...streams, s]) x.close();
  });

  it("with --tenant-reserve-pace false, lets it go into a free slot at once, behind the four in prefill", async () => {
    const { sim, router, before, flood, fifth, firstBytes } = await floodInPrefill({
      tenantReservePace: false,
    });
    await waitFor(() => sim.stats().requests === before + 5, 5000, "the fifth at the engine");
    expect(firstBytes()).toBe(0);
    expect(router.context.admission.waiting).toBe(0);
    for (const x of [...(await Promise.all(flood)), await fifth]) x.close();
  });

  it("does not pace by requests whose first byte comes only with their end (non-streaming answers)", async () => {
    const sim = await startSimWorker({ id: "slow", maxRunning: 8, timeScale: 5 });
    started.sims = [sim];
    const router = await startTestRouter({ workerUrls: [sim.url], ...HOLD_AT_FULL_BATCH });
    started.router = router;
    await router.context.introspection.pollAll();
    // Another tenant in flight all along (active past the 2 s window).
    const other = await openStream(router.url, "other");
    const before = sim.stats().requests;
    const stop = new AbortController();
    const answer = (i: number) =>
      fetch(`${router.url}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-tenant-id": "flood" },
        body: JSON.stringify({ model: MODEL, prompt: `${i} ${"x".repeat(8000)}`, max_tokens: 500 }),
        signal: stop.signal,
      }).catch(() => undefined);
    try {
      const four = [0, 1, 2, 3].map(answer);
      await waitFor(() => sim.stats().requests === before + 4, 5000, "the four at the engine");
      // Their prefill is invisible until their answers end: the fifth goes into a free slot.
      const fifth = answer(4);
      await waitFor(() => sim.stats().requests === before + 5, 5000, "the fifth at the engine");
      void four;
      void fifth;
    } finally {
      stop.abort();
      other.close();
    }
  });

  it("learns a vLLM engine's cap from vllm:num_requests_running when a reading shows it full", async () => {
    // Live gauges: read as soon as the engine queues (vLLM sets them at its step's end).
    const { sim, router, worker } = await holdingAtFullBatch({
      id: "vllm",
      flavor: "vllm",
      maxRunning: 2,
      decodeLogInterval: 0,
    });
    // vLLM says no cap: unknown, so not held (the first burst reaches the engine).
    expect(fullBatchOf(worker)).toBeUndefined();
    expect(freeSlots(worker, Date.now())).toBeUndefined();
    const streams = await Promise.all(["a", "b"].map((n) => openStream(router.url, n)));
    const queued = fetch(`${router.url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: MODEL, prompt: "third", max_tokens: 2 }),
    });
    await waitFor(() => sim.stats().waiting === 1, 5000, "the engine queueing the third");
    await router.context.introspection.pollAll();
    expect(fullBatchOf(worker)).toBe(2);
    expect(freeSlots(worker, Date.now())).toBe(-1);
    for (const s of streams) s.close();
    expect((await queued).status).toBe(200);
    await waitFor(() => freeSlots(worker, Date.now()) === 2, 5000, "the slots back");
  });
});
