/**
 * Admission end to end (issue 24): real sockets, a simulated SGLang engine with a small running
 * batch (2) whose /metrics the router reads every 200 ms, and --queue-when-saturated. The engine
 * keeps its own queue at the threshold (2) and the router holds the rest, releasing by priority
 * and tenant share.
 */
import { describe, expect, it } from "vitest";
import { startSimWorker } from "../../sim/worker.js";
import { metric, startedPerTest, workerId } from "../faults/support.js";
import { startTestRouter, waitFor } from "../helpers/router.js";

const SATURATED = {
  queueWhenSaturated: true,
  saturationQueueDepth: 2,
  enginePollIntervalSecs: 0.2,
  queueTimeoutSecs: 30,
  firstByteTimeoutSecs: 30,
};

function ask(
  routerUrl: string,
  name: string,
  headers: Record<string, string> = {},
  signal?: AbortSignal,
  maxTokens = 24,
): Promise<Response> {
  return fetch(`${routerUrl}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    // 24 output tokens at one engine step (6 ms) each: ~150 ms a request, 2 at a time.
    body: JSON.stringify({ model: "m", prompt: `request ${name}`, max_tokens: maxTokens }),
    ...(signal !== undefined ? { signal } : {}),
  });
}

async function explain(routerUrl: string) {
  const res = await fetch(`${routerUrl}/debug/route/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "m", prompt: "would I wait?" }),
  });
  return ((await res.json()) as { admission: { would_queue: boolean; cause: string | null } })
    .admission;
}

describe("admission: queueing while the fleet is saturated", () => {
  const started = startedPerTest();

  async function saturatedFleet() {
    const sim = await startSimWorker({ id: "busy", maxRunning: 2 });
    started.sims = [sim];
    started.router = await startTestRouter({ workerUrls: [sim.url], ...SATURATED });
    const router = started.router;
    await router.context.introspection.pollAll();
    // A first wave past the batch: a reading that shows the engine's queue teaches the router
    // how many it runs when full (until then only readings can say it is saturated).
    const wave = Array.from({ length: 4 }, (_, i) =>
      ask(router.url, `wave ${i}`, {}, undefined, 100),
    );
    await waitFor(() => sim.stats().waiting >= 1, 5000, "the engine queueing");
    await router.context.introspection.pollAll();
    for (const answer of await Promise.all(wave)) await answer.text();
    await router.context.introspection.pollAll();
    return { sim, router };
  }

  it("turns saturation on under a flood and off after it: metrics and /debug/route say so", async () => {
    const { sim, router } = await saturatedFleet();
    const admission = router.context.admission;
    expect(await explain(router.url)).toMatchObject({ would_queue: false, cause: null });
    const flood = Array.from({ length: 12 }, (_, i) => ask(router.url, `flood ${i}`));
    await waitFor(() => admission.waiting >= 4, 5000, "requests held by the router");
    expect(sim.stats().waiting).toBeLessThanOrEqual(4);
    const labels = { worker: workerId(sim.url), reason: "engine_queue" };
    // Saturation flickers off for a moment at each completion, until the queue lets one more go
    // (longer on a loaded machine): the three are read again until one round has them all.
    let seen = { saturated: 0, wouldQueue: false, queued: 0 };
    await waitFor(
      async () => {
        seen = {
          saturated: await metric(router.url, "radixgate_worker_saturated", labels),
          wouldQueue: (await explain(router.url)).would_queue,
          queued: await metric(router.url, "radixgate_queue_length", { priority: "0" }),
        };
        return seen.saturated === 1 && seen.wouldQueue && seen.queued > 0;
      },
      5000,
      () =>
        `the worker reported saturated, /debug/route and the queue saying so: ${JSON.stringify(seen)}`,
    );
    expect(seen.saturated).toBe(1);
    expect(seen.wouldQueue).toBe(true);
    expect(seen.queued).toBeGreaterThan(0);

    const answers = await Promise.all(flood);
    expect(answers.map((r) => r.status)).toEqual(Array(12).fill(200));
    expect(sim.stats().requests).toBe(16);
    await router.context.introspection.pollAll();
    expect(await explain(router.url)).toMatchObject({ would_queue: false, cause: null });
    expect(await metric(router.url, "radixgate_worker_saturated", labels)).toBe(0);
    expect(await metric(router.url, "radixgate_queue_wait_seconds_count")).toBeGreaterThan(0);
  });

  it("serves a higher priority first while lower ones wait", async () => {
    const { router } = await saturatedFleet();
    const finished: string[] = [];
    const send = (name: string, priority: number) =>
      ask(router.url, name, { "x-priority": String(priority) }).then(async (r) => {
        await r.text();
        finished.push(name);
        return r.status;
      });
    const low = Array.from({ length: 16 }, (_, i) => send(`low${i}`, -1));
    await waitFor(() => router.context.admission.waiting >= 8, 5000, "low requests held");
    const high = Array.from({ length: 3 }, (_, i) => send(`high${i}`, 5));
    expect(await Promise.all([...low, ...high])).toEqual(Array(19).fill(200));
    const lastHigh = Math.max(...["high0", "high1", "high2"].map((n) => finished.indexOf(n)));
    // Only the low requests already at the engine (running + its queue of 2) and at most a
    // couple released meanwhile finish before the last high one.
    expect(finished.length - 1 - lastHigh).toBeGreaterThanOrEqual(5);
  });

  it("gives a tenant sending 10x the requests its fair share, not 10x", async () => {
    const { router } = await saturatedFleet();
    const finished: string[] = [];
    const send = (name: string, tenant: string) =>
      ask(router.url, name, { "x-tenant-id": tenant }).then(async (r) => {
        await r.text();
        finished.push(name);
        return r.status;
      });
    const heavy = Array.from({ length: 30 }, (_, i) => send(`a${i}`, "tenant-a"));
    await waitFor(() => router.context.admission.waiting >= 15, 5000, "tenant a's flood held");
    const light = Array.from({ length: 3 }, (_, i) => send(`b${i}`, "tenant-b"));
    expect(await Promise.all([...heavy, ...light])).toEqual(Array(33).fill(200));
    const lastLight = Math.max(...["b0", "b1", "b2"].map((n) => finished.indexOf(n)));
    // First come, first served would finish b after every a (none after it); tenant shares let b
    // go in turn with a: most of the 15 or more a requests waiting when b came finish after b.
    expect(finished.length - 1 - lastLight).toBeGreaterThanOrEqual(8);
  });

  it("a client that disconnects while queued leaves the queue at once; a short header deadline answers 429", async () => {
    const { sim, router } = await saturatedFleet();
    const admission = router.context.admission;
    const flood = Array.from({ length: 16 }, (_, i) => ask(router.url, `flood ${i}`));
    await waitFor(() => admission.waiting >= 3, 5000, "requests held");
    // Lowest priority, so neither request below can be let go before the test is done with it.
    const last = { "x-priority": "-5" };
    const leaving = new AbortController();
    const gone = ask(
      router.url,
      "leaves",
      { ...last, "x-tenant-id": "leaver" },
      leaving.signal,
    ).catch(() => "aborted");
    const leaverQueued = () => admission.queue.shape.tenantSizes().get("leaver") ?? 0;
    await waitFor(() => leaverQueued() === 1, 2000, "the leaving request queued");
    leaving.abort();
    expect(await gone).toBe("aborted");
    await waitFor(() => leaverQueued() === 0, 2000, "the leaving request gone from the queue");

    const hurried = await ask(router.url, "hurried", { ...last, "x-queue-timeout-secs": "0.05" });
    expect(hurried.status).toBe(429);
    expect(Number(hurried.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(
      ((await hurried.json()) as { error: { code: string; type: string } }).error,
    ).toMatchObject({
      code: "queue_timeout",
      type: "server_error",
    });
    expect((await Promise.all(flood)).map((r) => r.status)).toEqual(Array(16).fill(200));
    // Neither the client that left nor the hurried one reached the engine (4 warmed it up).
    expect(sim.stats().requests).toBe(20);
  });

  it("a router that stops answers its queued requests 503 shutting_down at once", async () => {
    const { sim, router } = await saturatedFleet();
    const admission = router.context.admission;
    const flood = Array.from({ length: 10 }, (_, i) => ask(router.url, `flood ${i}`));
    await waitFor(() => admission.waiting >= 4, 5000, "requests held");
    // Every request read by the router before it stops: a request still in the socket's buffer
    // when the server closes is reset, whatever the router does (a race of the test, not the rule).
    await waitFor(
      () => admission.waiting + sim.stats().requests - 4 >= 10,
      5000,
      "every request held or sent",
    );
    const stopping = router.stop(5000);
    expect(admission.waiting).toBe(0);
    const answers = await Promise.all(flood);
    const refused = answers.filter((r) => r.status === 503);
    expect(refused.length).toBeGreaterThanOrEqual(1);
    for (const r of refused) {
      expect(((await r.json()) as { error: { code: string } }).error.code).toBe("shutting_down");
    }
    expect(answers.filter((r) => r.status === 200).length + refused.length).toBe(10);
    await stopping;
    // None of the refused reached the engine (4 warmed it up).
    expect(sim.stats().requests).toBeLessThanOrEqual(4 + 10 - refused.length);
    started.router = undefined;
  });
});
