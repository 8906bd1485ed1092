import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import type { ConfigOverrides } from "../../src/config.js";
import type { RunningRouter } from "../../src/server.js";
import { postJson, startTestRouter, waitFor } from "../helpers/router.js";

/**
 * Issue 19, item 1: model names as the engines treat them. SGLang runs its model under any name
 * (clients and SGLang's docs send "default"); vLLM answers 404 for a name it does not list. Real
 * sockets, the SGLang and vLLM simulators, and the router learning each worker's engine and models
 * by introspection, as in production.
 */

interface ErrorBody {
  error: { message: string; type: string; code: string | number; param?: string | null };
}

interface Explained {
  model_route: string;
  candidates: { worker: string }[];
  excluded: { worker: string; reason: string; detail?: string }[];
}

/** A router over `sims` that has read every worker's engine and model list. */
async function introspectedRouter(sims: SimWorker[], overrides: ConfigOverrides = {}) {
  const router = await startTestRouter({
    workerUrls: sims.map((s) => s.url),
    enginePollIntervalSecs: 60,
    ...overrides,
  });
  await waitFor(
    () =>
      router.context.registry
        .list()
        .every((w) => w.servedModels !== undefined && w.signals.engine !== undefined),
    10_000,
    "engines and models introspected",
  );
  return router;
}

function complete(router: RunningRouter, model: string, prompt = "Once upon a time") {
  return postJson(`${router.url}/v1/completions`, { model, prompt, max_tokens: 1 });
}

describe("model names behind a mixed SGLang + vLLM fleet (--model-routing engine)", () => {
  let sglang: SimWorker;
  let vllm: SimWorker;
  let router: RunningRouter;

  beforeAll(async () => {
    [sglang, vllm] = await Promise.all([
      startSimWorker({ id: "sg", timeScale: 0, flavor: "sglang", model: "llama" }),
      startSimWorker({ id: "vl", timeScale: 0, flavor: "vllm", model: "qwen" }),
    ]);
    router = await introspectedRouter([sglang, vllm]);
  });
  afterAll(async () => {
    await router.stop(100);
    await Promise.all([sglang.close(), vllm.close()]);
  });

  it("learns each worker's engine from what introspection reads", () => {
    const engines = router.context.registry.list().map((w) => [w.url, w.engine]);
    expect(engines).toEqual([
      [sglang.url, "sglang"],
      [vllm.url, "vllm"],
    ]);
  });

  it('the official client\'s model "default" reaches the SGLang worker, not a 404', async () => {
    const client = new OpenAI({ baseURL: `${router.url}/v1`, apiKey: "none", maxRetries: 0 });
    for (let i = 0; i < 4; i++) {
      const { data, response } = await client.chat.completions
        .create({
          model: "default",
          messages: [{ role: "user", content: `Say hi ${i}` }],
          max_tokens: 2,
        })
        .withResponse();
      expect(data.object).toBe("chat.completion");
      expect(response.headers.get("x-sim-worker-id")).toBe("sg");
    }
  });

  it("a listed name goes to the worker listing it, whichever engine", async () => {
    for (const [model, id] of [
      ["qwen", "vl"],
      ["llama", "sg"],
    ] as const) {
      const res = await complete(router, model);
      expect(res.status).toBe(200);
      expect(res.headers.get("x-sim-worker-id")).toBe(id);
      await res.arrayBuffer();
    }
  });

  it("/debug/route shows the rule: the vLLM worker left out, and why", async () => {
    const res = await postJson(`${router.url}/debug/route/v1/completions`, {
      model: "default",
      prompt: "hi",
    });
    expect(res.status).toBe(200);
    const out = (await res.json()) as Explained;
    expect(out.model_route).toBe("any_name");
    const vl = router.context.registry.list().find((w) => w.url === vllm.url)!;
    expect(out.candidates.map((c) => c.worker)).toEqual([
      router.context.registry.list().find((w) => w.url === sglang.url)!.id,
    ]);
    expect(out.excluded).toEqual([
      {
        worker: vl.id,
        url: vl.url,
        reason: "model_not_served",
        detail: "does not list 'default', and vllm refuses names it does not list",
      },
    ]);
  });

  it("every id GET /v1/models lists is routed to a worker that takes it", async () => {
    const res = await fetch(`${router.url}/v1/models`);
    const ids = ((await res.json()) as { data: { id: string }[] }).data.map((m) => m.id);
    expect(ids.sort()).toEqual(["llama", "qwen"]);
    for (const id of ids) {
      const answer = await complete(router, id);
      expect(answer.status).toBe(200);
      await answer.arrayBuffer();
    }
  });
});

describe("model names the router refuses itself", () => {
  it("a vLLM-only fleet: 404 model_not_found for a name no worker lists, as vLLM would", async () => {
    const vllm = await startSimWorker({ id: "vl", timeScale: 0, flavor: "vllm", model: "qwen" });
    const router = await introspectedRouter([vllm]);
    try {
      // The engine's own answer, in vLLM's shape (vllm/entrypoints/openai/engine/serving.py).
      const direct = await postJson(`${vllm.url}/v1/completions`, {
        model: "default",
        prompt: "hi",
      });
      expect(direct.status).toBe(404);
      expect(await direct.json()).toEqual({
        error: {
          message: "The model `default` does not exist.",
          type: "NotFoundError",
          param: "model",
          code: 404,
        },
      });
      const res = await complete(router, "default");
      expect(res.status).toBe(404);
      const body = (await res.json()) as ErrorBody;
      expect(body.error).toMatchObject({ code: "model_not_found", type: "invalid_request_error" });
      expect(body.error.message).toContain("none takes any model name");
      expect(vllm.stats().requests).toBe(1); // the direct request only
    } finally {
      await router.stop(100);
      await vllm.close();
    }
  });

  it("--model-routing strict keeps the 404 for a name no worker lists, SGLang included", async () => {
    const sglang = await startSimWorker({ id: "sg", timeScale: 0, model: "llama" });
    const router = await introspectedRouter([sglang], { modelRouting: "strict" });
    try {
      const res = await complete(router, "default");
      expect(res.status).toBe(404);
      expect(((await res.json()) as ErrorBody).error.code).toBe("model_not_found");
      const listed = await complete(router, "llama");
      expect(listed.status).toBe(200);
      await listed.arrayBuffer();
    } finally {
      await router.stop(100);
      await sglang.close();
    }
  });
});
