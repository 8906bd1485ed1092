import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import type { RunningRouter } from "../../src/server.js";
import { postJson, startTestRouter, waitFor } from "../helpers/router.js";

describe("operations endpoints", () => {
  let sim: SimWorker;
  let router: RunningRouter;

  beforeAll(async () => {
    sim = await startSimWorker({ id: "ops", timeScale: 0 });
    router = await startTestRouter({
      policy: "cache_aware",
      workerUrls: [sim.url],
      healthCheckIntervalSecs: 0.05,
      healthFailureThreshold: 2,
      healthSuccessThreshold: 2,
      prometheusPort: 0,
    });
  });
  afterAll(async () => {
    await router.stop(100);
    await sim.close();
  });

  it("/health and /liveness answer 200 while the process is up", async () => {
    expect((await fetch(`${router.url}/health`)).status).toBe(200);
    expect((await fetch(`${router.url}/liveness`)).status).toBe(200);
  });

  it("/readiness follows worker health: 200, 503 with a reason when unhealthy, 200 again", async () => {
    expect((await fetch(`${router.url}/readiness`)).status).toBe(200);
    sim.setFaults({ unhealthy: true });
    await waitFor(
      async () => (await fetch(`${router.url}/readiness`)).status === 503,
      3000,
      "readiness 503",
    );
    const body = (await (await fetch(`${router.url}/readiness`)).json()) as { reason: string };
    expect(body.reason).toMatch(/none of 1 workers/);
    // Unhealthy workers stay listed and keep their trees.
    expect(router.context.registry.size).toBe(1);
    sim.setFaults({ unhealthy: false });
    await waitFor(
      async () => (await fetch(`${router.url}/readiness`)).status === 200,
      3000,
      "readiness 200",
    );
  });

  it("/metrics exposes the request, routing, tree and worker metrics", async () => {
    await postJson(`${router.url}/v1/completions`, {
      prompt: "metrics please",
      max_tokens: 1,
    }).then((r) => r.arrayBuffer());
    const text = await (await fetch(`${router.url}/metrics`)).text();
    const id = router.context.registry.list()[0]!.id;
    for (const name of [
      'radixgate_requests_total{endpoint="completions",status="200"} 1',
      "radixgate_request_duration_seconds_bucket",
      "radixgate_time_to_first_byte_seconds_bucket",
      'radixgate_routing_decisions_total{policy="cache_aware",branch="cache_miss"}',
      "radixgate_match_ratio_bucket",
      `radixgate_tree_characters{worker="${id}"} 14`,
      `radixgate_worker_in_flight{worker="${id}"} 0`,
      `radixgate_worker_healthy{worker="${id}"} 1`,
      `radixgate_worker_circuit_state{worker="${id}"} 0`,
      `radixgate_worker_requests_served_total{worker="${id}"} 1`,
      `radixgate_worker_info{worker="${id}",url="${sim.url}"} 1`,
      "radixgate_tree_evicted_characters_total 0",
      "radixgate_retries_total",
      "radixgate_upstream_errors_total",
      "radixgate_workers 1",
    ]) {
      expect(text).toContain(name);
    }
  });

  it("/metrics: Node's process metrics carry the prefix once, served requests are a counter", async () => {
    const text = await (await fetch(`${router.url}/metrics`)).text();
    expect(text).toContain("radixgate_process_cpu_user_seconds_total");
    expect(text).toContain("radixgate_nodejs_eventloop_lag_seconds");
    expect(text).not.toContain("radixgate_process_process_");
    expect(text).toContain("# TYPE radixgate_worker_requests_served_total counter");
    // The worker label is the worker id everywhere; the URL appears only in the info metric.
    const urlLabelled = text.split("\n").filter((line) => line.includes(`worker="${sim.url}"`));
    expect(urlLabelled).toEqual([]);
  });

  it("/metrics is also served on --prometheus-port", async () => {
    expect(router.metricsPort).toBeGreaterThan(0);
    const res = await fetch(`http://127.0.0.1:${router.metricsPort}/metrics`);
    expect(res.status).toBe(200);
    expect(await res.text()).toContain("radixgate_requests_total");
  });

  it("unknown routes get a JSON 404, wrong methods a JSON 405", async () => {
    const missing = await fetch(`${router.url}/v2/whatever`);
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as { error: { code: string } }).error.code).toBe("not_found");
    const wrong = await fetch(`${router.url}/v1/chat/completions`);
    expect(wrong.status).toBe(405);
    expect(((await wrong.json()) as { error: { code: string } }).error.code).toBe(
      "method_not_allowed",
    );
  });
});

describe("while shutting down", () => {
  it("the data plane answers 503 shutting_down with Connection: close, and readiness is 503", async () => {
    const sim = await startSimWorker({ id: "bye", timeScale: 0 });
    const router = await startTestRouter({ policy: "cache_aware", workerUrls: [sim.url] });
    try {
      router.context.state.shuttingDown = true;
      const res = await postJson(`${router.url}/v1/completions`, { prompt: "late", max_tokens: 1 });
      expect(res.status).toBe(503);
      expect(res.headers.get("connection")).toBe("close");
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe("shutting_down");
      expect(sim.stats().requests).toBe(0);
      const ready = await fetch(`${router.url}/readiness`);
      expect(ready.status).toBe(503);
      expect(((await ready.json()) as { reason: string }).reason).toBe("shutting down");
    } finally {
      router.context.state.shuttingDown = false;
      await router.stop(100);
      await sim.close();
    }
  });
});
