import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import type { RunningRouter } from "../../src/server.js";
import { postChat, startTestRouter } from "../helpers/router.js";

describe("GET /debug/capacity and the radixgate_fleet_* metrics", () => {
  let workers: SimWorker[] = [];
  let router: RunningRouter;
  beforeAll(async () => {
    workers = await Promise.all(["a", "b"].map((id) => startSimWorker({ id, timeScale: 0 })));
    router = await startTestRouter({
      policy: "cache_aware",
      workerUrls: workers.map((w) => w.url),
      fleetSignalIntervalSecs: 0,
    });
  });
  afterAll(async () => {
    await router.stop(100);
    await Promise.all(workers.map((w) => w.close()));
  });

  it("explains the saturation, desired workers and cache pressure, and names the worker to drain first", async () => {
    const res = await postChat(router, "You are terse. ".repeat(50), "hello");
    const used = res.headers.get("x-radixgate-worker");
    await res.text();
    // The prefill demand is the settled tokens over the time since the last sample (here the
    // router's start): with modules already loaded, start and request can take under 10 ms, and
    // one ~190-token prompt in 10 ms reads as more than two workers' 10000 tokens/s.
    await new Promise((resolve) => setTimeout(resolve, 100));
    router.context.capacity.sample();
    const body = (await (await fetch(`${router.url}/debug/capacity`)).json()) as {
      healthy_workers: number;
      saturation: {
        prefill_tokens: { ratio: number; hint?: string };
        running_slots: { capacity: number };
      };
      desired_workers: Record<string, { desired: number }>;
      rule: { target_utilization: number };
      scale_in: { drain_first: { id: string }; order: { id: string }[] };
      short_of: string;
    };
    expect(body.healthy_workers).toBe(2);
    expect(body.saturation.prefill_tokens.ratio).toBeGreaterThan(0);
    expect(body.saturation.prefill_tokens.hint).toBeUndefined();
    expect(body.saturation.running_slots.capacity).toBe(2 * 256);
    expect(body.desired_workers["*"]?.desired).toBe(1);
    expect(body.rule.target_utilization).toBe(0.8);
    expect(body.short_of).toBe("nothing");
    // The worker that served the request's cache is drained last.
    expect(body.scale_in.order.map((o) => o.id)).toHaveLength(2);
    expect(body.scale_in.drain_first.id).not.toBe(used);
    const metrics = await (await fetch(`${router.url}/metrics`)).text();
    expect(metrics).toMatch(/^radixgate_fleet_desired_workers\{model="\*"\} 1$/m);
    expect(metrics).toMatch(/^radixgate_fleet_saturation_ratio\{resource="running_slots"\} 0$/m);
  });

  it("says when the prefill ratio exceeds 1 only because the assumed throughput is too low", async () => {
    // One token a second per worker: any settled prompt reads as many times the capacity, while
    // the batches stay empty; the signal names the flag rather than a fleet short of compute.
    const low = await startTestRouter({
      policy: "cache_aware",
      workerUrls: workers.map((w) => w.url),
      fleetSignalIntervalSecs: 0,
      workerPrefillTokensPerSec: 1,
    });
    try {
      await (await postChat(low, "You are terse. ".repeat(50), "hello")).text();
      const reading = low.context.capacity.sample();
      expect(reading.prefill.ratio).toBeGreaterThan(1);
      const body = (await (await fetch(`${low.url}/debug/capacity`)).json()) as {
        saturation: { prefill_tokens: { hint?: string } };
      };
      expect(body.saturation.prefill_tokens.hint).toMatch(/--worker-prefill-tokens-per-sec/);
    } finally {
      await low.stop(100);
    }
  });
});
