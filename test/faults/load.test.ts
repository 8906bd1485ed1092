import { describe, expect, it } from "vitest";
import { startSimWorker } from "../../sim/worker.js";
import { startTestRouter, waitFor } from "../helpers/router.js";
import {
  chat,
  errorCode,
  metric,
  okCompletion,
  startedPerTest,
  startTinyUpstream,
} from "./support.js";

describe("load: maxConcurrentRequests with a bounded queue", () => {
  const started = startedPerTest();

  it("429 when the queue is full, 429 with Retry-After when a request waited past queueTimeoutSecs", async () => {
    started.sims = [await startSimWorker({ id: "hang", timeScale: 0, faults: { hang: true } })];
    const sim = started.sims[0]!;
    started.router = await startTestRouter({
      workerUrls: [sim.url],
      maxConcurrentRequests: 1,
      queueSize: 1,
      queueTimeoutSecs: 0.3,
      firstByteTimeoutSecs: 30,
    });
    const admission = started.router.context.admission;
    const holder = new AbortController();
    const running = chat(
      started.router.url,
      "holds the only slot",
      {},
      { signal: holder.signal },
    ).catch(() => undefined);
    await waitFor(() => sim.stats().hanging === 1, 2000, "the first request at the worker");
    const queued = chat(started.router.url, "waits in the queue");
    await waitFor(() => admission.waiting === 1, 2000, "the second request queued");

    const rejected = await chat(started.router.url, "no room left");
    expect(rejected.status).toBe(429);
    expect(await errorCode(rejected)).toBe("too_many_requests");

    const timedOut = await queued;
    expect(timedOut.status).toBe(429);
    expect(Number(timedOut.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(await errorCode(timedOut)).toBe("queue_timeout");
    // Neither refused request reached the worker.
    expect(sim.stats().requests).toBe(1);
    expect(
      await metric(started.router.url, "radixgate_queue_rejections_total", {
        reason: "too_many_requests",
      }),
    ).toBe(1);
    expect(
      await metric(started.router.url, "radixgate_queue_rejections_total", {
        reason: "queue_timeout",
      }),
    ).toBe(1);

    // Free the slot: the router serves again.
    holder.abort();
    await running;
    sim.setFaults({ hang: false });
    await waitFor(() => admission.running === 0, 2000, "the slot freed");
    expect((await chat(started.router.url, "after the rush")).status).toBe(200);
  });

  it("queued requests go in turn and never exceed the limit at the workers", async () => {
    let current = 0;
    let peak = 0;
    const upstream = await startTinyUpstream((_req, res) => {
      current += 1;
      peak = Math.max(peak, current);
      setTimeout(() => {
        current -= 1;
        okCompletion(res, "tiny");
      }, 30);
    });
    started.tiny = [upstream];
    started.router = await startTestRouter({
      workerUrls: [upstream.url],
      maxConcurrentRequests: 2,
      queueSize: 10,
      queueTimeoutSecs: 10,
    });
    const answers = await Promise.all(
      Array.from({ length: 8 }, (_, i) => chat(started.router!.url, `queued ${i}`)),
    );
    expect(answers.map((r) => r.status)).toEqual(Array(8).fill(200));
    expect(upstream.hits).toHaveLength(8);
    expect(peak).toBe(2);
    expect(started.router.context.admission.running).toBe(0);
  });

  it("a client that leaves while queued just leaves the queue", async () => {
    started.sims = [await startSimWorker({ id: "hang2", timeScale: 0, faults: { hang: true } })];
    const sim = started.sims[0]!;
    started.router = await startTestRouter({
      workerUrls: [sim.url],
      maxConcurrentRequests: 1,
      queueSize: 4,
      queueTimeoutSecs: 30,
      firstByteTimeoutSecs: 30,
    });
    const admission = started.router.context.admission;
    const first = new AbortController();
    const second = new AbortController();
    const a = chat(started.router.url, "slot", {}, { signal: first.signal }).catch(() => undefined);
    await waitFor(() => sim.stats().hanging === 1, 2000, "the first request at the worker");
    const b = chat(started.router.url, "queued", {}, { signal: second.signal }).catch(
      () => undefined,
    );
    await waitFor(() => admission.waiting === 1, 2000, "the second request queued");
    second.abort();
    await b;
    await waitFor(() => admission.waiting === 0, 2000, "the queue emptied");
    expect(sim.stats().requests).toBe(1);
    first.abort();
    await a;
    await waitFor(() => admission.running === 0, 2000, "the slot freed");
  });
});
