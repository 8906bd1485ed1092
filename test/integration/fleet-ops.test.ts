import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import type { RunningRouter } from "../../src/server.js";
import { postChat, postJson, startTestRouter, waitFor } from "../helpers/router.js";

/**
 * SGLang's router's fleet operations (sgl-model-gateway/src/server.rs, core/worker_manager.rs):
 * /flush_cache, /get_loads, /engine_metrics, /health_generate, /server_info, against SGLang and
 * vLLM simulators.
 */
describe("fleet operations as SGLang's router answers them", () => {
  let sglang: SimWorker;
  let sglang2: SimWorker;
  let vllm: SimWorker;
  let router: RunningRouter;
  const idOf = (sim: SimWorker) =>
    router.context.registry.list().find((w) => w.url === sim.url)?.id as string;

  beforeAll(async () => {
    [sglang, sglang2, vllm] = await Promise.all([
      startSimWorker({ id: "s1", timeScale: 0, flavor: "sglang", model: "llama", apiKey: "k" }),
      startSimWorker({ id: "s2", timeScale: 0, flavor: "sglang", model: "llama", apiKey: "k" }),
      startSimWorker({ id: "v1", timeScale: 0, flavor: "vllm", model: "qwen", apiKey: "k" }),
    ]);
    router = await startTestRouter({
      workerUrls: [sglang.url, sglang2.url, vllm.url],
      workerApiKey: "k",
      enginePollIntervalSecs: 60,
    });
    await waitFor(
      () =>
        router.context.registry
          .list()
          .every((w) => w.servedModels !== undefined && w.engine !== undefined),
      10_000,
      "engines introspected",
    );
  });
  afterAll(async () => {
    await router.stop(100);
    await Promise.all([sglang.close(), sglang2.close(), vllm.close()]);
  });

  it("POST /flush_cache flushes every worker (vLLM through /reset_prefix_cache) and clears their index entries", async () => {
    for (let i = 0; i < 6; i++) {
      await postChat(
        router,
        `system prompt number ${i} `.repeat(20),
        "q",
        i % 2 ? "llama" : "qwen",
      );
    }
    const held = () =>
      router.context.registry.list().reduce((n, w) => n + router.context.index.size(w.id), 0);
    expect(held()).toBeGreaterThan(0);
    const res = await fetch(`${router.url}/flush_cache`, { method: "POST" });
    expect(res.status).toBe(200);
    const body = (await res.json()) as Record<string, unknown>;
    expect(body).toMatchObject({
      successful: [sglang.url, sglang2.url, vllm.url],
      failed: [],
      total_workers: 3,
      http_workers: 3,
      message: "Successfully flushed cache on all 3 HTTP workers",
    });
    expect(held()).toBe(0);
    expect(sglang.stats().endpoints["/flush_cache"]).toBe(1);
    expect(vllm.stats().endpoints["/reset_prefix_cache"]).toBe(1);
  });

  it("POST /flush_cache with a model flushes only the workers serving it", async () => {
    await postChat(router, "a long shared system prompt ".repeat(20), "q", "qwen");
    await postChat(router, "another long system prompt ".repeat(20), "q", "llama");
    const res = await postJson(`${router.url}/flush_cache`, { model: "qwen" });
    const body = (await res.json()) as { successful: string[]; http_workers: number };
    expect(body.successful).toEqual([vllm.url]);
    expect(body.http_workers).toBe(1);
    expect(router.context.index.size(idOf(vllm))).toBe(0);
    const sglangHeld =
      router.context.index.size(idOf(sglang)) + router.context.index.size(idOf(sglang2));
    expect(sglangHeld).toBeGreaterThan(0);
  });

  it("a worker that fails its flush is listed with why", async () => {
    await sglang2.close();
    await postChat(router, "a prompt for s1 or s2 ".repeat(20), "q", "llama");
    const res = await fetch(`${router.url}/flush_cache?model=llama`, { method: "POST" });
    const body = (await res.json()) as {
      successful: string[];
      failed: [string, string][];
      message: string;
    };
    expect(body.successful).toEqual([sglang.url]);
    expect(body.failed.map(([url]) => url)).toEqual([sglang2.url]);
    expect(body.message).toBe(
      "Cache flush completed: 1 succeeded, 1 failed (out of 2 HTTP workers)",
    );
    sglang2 = await startSimWorker({
      id: "s2",
      timeScale: 0,
      flavor: "sglang",
      model: "llama",
      apiKey: "k",
      port: Number(new URL(sglang2.url).port),
    });
  });

  it("GET /get_loads sums SGLang's /get_load over ranks; vLLM has none (-1)", async () => {
    const res = await fetch(`${router.url}/get_loads`);
    expect(res.status).toBe(200);
    const body = (await res.json()) as {
      loads: { worker: string; load: number; id: string; in_flight: number }[];
      total_workers: number;
      successful: number;
      failed: number;
    };
    expect(body.total_workers).toBe(3);
    expect(body.successful).toBe(2);
    expect(body.failed).toBe(1);
    const byUrl = new Map(body.loads.map((l) => [l.worker, l]));
    expect(byUrl.get(sglang.url)?.load).toBe(0);
    expect(byUrl.get(vllm.url)?.load).toBe(-1);
    expect(byUrl.get(sglang.url)).toMatchObject({ id: idOf(sglang), in_flight: 0 });
    expect((await fetch(`${router.url}/v1/loads`)).status).toBe(200);
  });

  it("GET /engine_metrics: every worker's series, labelled worker_addr, each family once", async () => {
    const res = await fetch(`${router.url}/engine_metrics`);
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).toContain(`worker_addr="${sglang.url}"`);
    expect(text).toContain(`worker_addr="${vllm.url}"`);
    expect(text).toMatch(/^sglang:num_running_reqs\{worker_addr="/m);
    expect(text).toMatch(/^vllm:num_requests_running\{worker_addr="/m);
    const types = text.split("\n").filter((l) => l.startsWith("# TYPE sglang:num_running_reqs "));
    expect(types).toHaveLength(1);
  });

  it("GET /health_generate relays a worker's own check", async () => {
    const res = await fetch(`${router.url}/health_generate`);
    expect(res.status).toBe(200);
    sglang.setFaults({ unhealthy: true });
    sglang2.setFaults({ unhealthy: true });
    try {
      const down = await fetch(`${router.url}/health_generate`);
      // The workers are still available to the router (no health check ran): their answer counts.
      expect(down.status).toBe(503);
    } finally {
      sglang.setFaults({ unhealthy: false });
      sglang2.setFaults({ unhealthy: false });
    }
  });

  it("GET /server_info is SGLang's server info, its keys removed", async () => {
    const res = await fetch(`${router.url}/server_info`);
    expect(res.status).toBe(200);
    const body = (await res.json()) as Record<string, unknown>;
    expect(body.model_path).toBe("llama");
    expect(body).not.toHaveProperty("api_key");
    expect(body).not.toHaveProperty("admin_api_key");
    expect(JSON.stringify(body)).not.toContain('"k"');
  });
});
