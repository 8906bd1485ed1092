import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import type { RunningRouter } from "../../src/server.js";
import { postJson, startTestRouter, waitFor } from "../helpers/router.js";

/**
 * The engines' other POST routes through the router: each goes to a worker serving the model and
 * comes back as the engine answered it; SGLang's /generate never goes to a vLLM worker.
 */
describe("engine endpoints routed by model (mixed SGLang + vLLM fleet)", () => {
  let sglang: SimWorker;
  let vllm: SimWorker;
  let router: RunningRouter;

  beforeAll(async () => {
    [sglang, vllm] = await Promise.all([
      startSimWorker({ id: "sg", timeScale: 0, flavor: "sglang", model: "llama" }),
      startSimWorker({ id: "vl", timeScale: 0, flavor: "vllm", model: "qwen" }),
    ]);
    router = await startTestRouter({
      workerUrls: [sglang.url, vllm.url],
      enginePollIntervalSecs: 60,
    });
    await waitFor(
      () =>
        router.context.registry
          .list()
          .every((w) => w.servedModels !== undefined && w.signals.engine !== undefined),
      10_000,
      "engines and models introspected",
    );
  });
  afterAll(async () => {
    await router.stop(100);
    await Promise.all([sglang.close(), vllm.close()]);
  });

  const cases: Array<{ path: string; body: Record<string, unknown>; expectKey: string }> = [
    { path: "/v1/rerank", body: { query: "q", documents: ["a", "b"] }, expectKey: "results" },
    { path: "/rerank", body: { query: "q", documents: ["a", "b"] }, expectKey: "results" },
    { path: "/v1/score", body: { text_1: "q", text_2: ["a", "b"] }, expectKey: "data" },
    { path: "/score", body: { text_1: "q", text_2: "a" }, expectKey: "data" },
    { path: "/v1/classify", body: { input: ["a", "b"] }, expectKey: "data" },
    { path: "/classify", body: { input: "a" }, expectKey: "data" },
    { path: "/tokenize", body: { prompt: "hello there" }, expectKey: "tokens" },
    { path: "/detokenize", body: { tokens: [1, 2, 3] }, expectKey: "prompt" },
  ];

  for (const { path, body, expectKey } of cases) {
    it(`POST ${path} goes to the worker serving the model, and its answer comes back`, async () => {
      const res = await postJson(`${router.url}${path}`, { model: "qwen", ...body });
      expect(res.status).toBe(200);
      expect(res.headers.get("x-radixgate-worker")).toBe(
        router.context.registry.list().find((w) => w.url === vllm.url)?.id,
      );
      expect(await res.json()).toHaveProperty(expectKey);
    });
  }

  it("an engine's 400 passes through (a rerank without documents)", async () => {
    const res = await postJson(`${router.url}/v1/rerank`, { model: "llama", query: "q" });
    expect(res.status).toBe(400);
    expect(res.headers.get("x-sim-worker-id")).toBe("sg");
  });

  it("/tokenize prefills nothing, so nothing enters the prefix index", async () => {
    const held = () => router.context.registry.list().map((w) => router.context.index.size(w.id));
    const before = held();
    const res = await postJson(`${router.url}/tokenize`, {
      model: "llama",
      prompt: "a".repeat(500),
    });
    expect(res.status).toBe(200);
    expect(held()).toEqual(before);
    // A scoring route prefills its query, which the index records.
    await postJson(`${router.url}/v1/rerank`, {
      model: "llama",
      query: "b".repeat(300),
      documents: ["x"],
    });
    expect(held().reduce((a, b) => a + b, 0)).toBeGreaterThan(before.reduce((a, b) => a + b, 0));
  });

  it("GET on a POST route is 405 with Allow: POST", async () => {
    const res = await fetch(`${router.url}/v1/rerank`);
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("POST");
  });

  it("the simulator's vLLM mode refuses /generate as vLLM's OpenAI server does", async () => {
    const res = await postJson(`${vllm.url}/generate`, { text: "hi" });
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({ detail: "Not Found" });
  });

  it("/generate never goes to a vLLM worker, whatever the model", async () => {
    for (let i = 0; i < 6; i++) {
      const res = await postJson(`${router.url}/generate`, {
        text: `prompt ${i}`,
        sampling_params: { max_new_tokens: 1 },
      });
      expect(res.status).toBe(200);
      expect(res.headers.get("x-sim-worker-id")).toBe("sg");
    }
  });

  it("/debug/route/generate lists the vLLM worker as excluded, saying why", async () => {
    const res = await postJson(`${router.url}/debug/route/generate`, { text: "hi" });
    const body = (await res.json()) as {
      candidates: { worker: string }[];
      excluded: { worker: string; reason: string; detail?: string }[];
    };
    const ids = router.context.registry.list();
    const vl = ids.find((w) => w.url === vllm.url)?.id;
    expect(body.candidates.map((c) => c.worker)).not.toContain(vl);
    expect(body.excluded).toContainEqual(
      expect.objectContaining({ worker: vl, reason: "endpoint_not_served" }),
    );
  });
});

describe("/generate before a fleet of vLLM workers only", () => {
  it("is the router's 404 naming why, as vLLM itself answers the path", async () => {
    const vllm = await startSimWorker({ id: "v", timeScale: 0, flavor: "vllm" });
    const router = await startTestRouter({ workerUrls: [vllm.url], enginePollIntervalSecs: 60 });
    try {
      await waitFor(
        () => router.context.registry.list().every((w) => w.engine !== undefined),
        10_000,
        "engine introspected",
      );
      const res = await postJson(`${router.url}/generate`, { text: "hi" });
      expect(res.status).toBe(404);
      const body = (await res.json()) as { error: { message: string } };
      expect(body.error.message).toContain("vLLM's OpenAI server does not serve POST /generate");
      expect(vllm.stats().endpoints["/generate"]).toBeUndefined();
    } finally {
      await router.stop(100);
      await vllm.close();
    }
  });
});
