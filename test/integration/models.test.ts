import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SimWorker, type SimWorkerOptions, startSimWorker } from "../../sim/worker.js";
import type { ApproximateIndex } from "../../src/index/approximate-index.js";
import type { RunningRouter } from "../../src/server.js";
import type { Worker } from "../../src/workers/worker.js";
import { postJson, startTestRouter, waitFor } from "../helpers/router.js";

const PROMPT = "You translate questions into SQL for the orders database. ".repeat(10);

/** A vLLM worker serving "llama" and its LoRA adapter "sql". */
const LORA_WORKER: SimWorkerOptions = {
  id: "lora",
  timeScale: 0,
  flavor: "vllm",
  model: "llama",
  loraAdapters: ["sql"],
};

describe("model-aware routing", () => {
  let lora: SimWorker;
  let plain: SimWorker;
  let qwen: SimWorker;
  let router: RunningRouter;
  const byUrl = (url: string) =>
    router.context.registry.list().find((w) => w.url === url) as Worker;

  beforeAll(async () => {
    [lora, plain, qwen] = await Promise.all([
      startSimWorker(LORA_WORKER),
      startSimWorker({ id: "plain", timeScale: 0, flavor: "vllm", model: "llama" }),
      startSimWorker({ id: "qwen", timeScale: 0, flavor: "vllm", model: "qwen" }),
    ]);
    router = await startTestRouter({ workerUrls: [lora.url, plain.url, qwen.url] });
    // What introspection of each worker's /v1/models fills in.
    byUrl(lora.url).servedModels = new Set(["llama", "sql"]);
    byUrl(plain.url).servedModels = new Set(["llama"]);
    byUrl(qwen.url).servedModels = new Set(["qwen"]);
  });
  afterAll(async () => {
    await router.stop(100);
    await Promise.all([lora.close(), plain.close(), qwen.close()]);
  });

  async function servedBy(model: string, prompt = PROMPT): Promise<string> {
    const res = await postJson(`${router.url}/v1/completions`, { model, prompt, max_tokens: 1 });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    return res.headers.get("x-sim-worker-id") ?? "";
  }

  it("sends a model only to the workers that serve it", async () => {
    for (let i = 0; i < 6; i++) {
      expect(await servedBy("qwen", `${PROMPT}${i}`)).toBe("qwen");
      expect(await servedBy("sql", `${PROMPT}${i}`)).toBe("lora");
      expect(["lora", "plain"]).toContain(await servedBy("llama", `q${i} ${PROMPT}`));
    }
  });

  it("answers 404 model_not_found, OpenAI-shaped, for a model no worker serves", async () => {
    const res = await postJson(`${router.url}/v1/chat/completions`, {
      model: "mistral",
      messages: [{ role: "user", content: "hi" }],
    });
    expect(res.status).toBe(404);
    const body = (await res.json()) as { error: { code: string; type: string; message: string } };
    expect(body.error).toMatchObject({ code: "model_not_found", type: "invalid_request_error" });
    expect(body.error.message).toContain("mistral");
  });

  it("a worker whose models are unknown may take any model", async () => {
    byUrl(qwen.url).servedModels = undefined;
    try {
      // The router passes it on; the worker decides (this simulated vLLM refuses it, as vLLM does).
      const res = await postJson(`${router.url}/v1/completions`, {
        model: "mistral",
        prompt: "hi",
      });
      expect(res.status).toBe(404);
      expect(res.headers.get("x-sim-worker-id")).toBe("qwen");
      expect(((await res.json()) as { error: { type: string } }).error.type).toBe("NotFoundError");
    } finally {
      byUrl(qwen.url).servedModels = new Set(["qwen"]);
    }
  });

  it("a model only an unavailable worker might serve: 503 that names the model, not 'none is available'", async () => {
    const qwenWorker = byUrl(qwen.url);
    qwenWorker.servedModels = undefined;
    qwenWorker.healthy = false;
    try {
      const res = await postJson(`${router.url}/v1/completions`, {
        model: "mistral",
        prompt: "hi",
      });
      expect(res.status).toBe(503);
      const body = (await res.json()) as { error: { code: string; message: string } };
      expect(body.error.code).toBe("no_workers_available");
      expect(body.error.message).toContain("No available worker serves the model 'mistral'");
      expect(body.error.message).toContain("the 2 available workers do not list it");
    } finally {
      qwenWorker.healthy = true;
      qwenWorker.servedModels = new Set(["qwen"]);
    }
  });

  it("keeps an adapter's prefixes in its own tree", async () => {
    const text = `adapter tree ${PROMPT}`;
    expect(await servedBy("sql", text)).toBe("lora");
    const index = router.context.index as ApproximateIndex;
    const out: number[] = [];
    index.match(text, "sql", [{ id: byUrl(lora.url).id }], out);
    expect(out[0]).toBe(text.length);
    index.match(text, undefined, [{ id: byUrl(lora.url).id }], out);
    expect(out[0]).toBe(0);
  });

  it("GET /v1/models merges every worker's list", async () => {
    const res = await fetch(`${router.url}/v1/models`);
    expect(res.status).toBe(200);
    const body = (await res.json()) as {
      object: string;
      data: { id: string; parent: string | null }[];
    };
    expect(body.object).toBe("list");
    expect(body.data.map((m) => m.id).sort()).toEqual(["llama", "qwen", "sql"]);
    expect(body.data.find((m) => m.id === "sql")!.parent).toBe("llama");
  });

  it("GET /v1/models still answers when a worker is down, and refuses other methods", async () => {
    await plain.close();
    const res = await fetch(`${router.url}/v1/models`);
    expect(res.status).toBe(200);
    expect(((await res.json()) as { data: unknown[] }).data.length).toBe(3);
    expect((await fetch(`${router.url}/v1/models`, { method: "DELETE" })).status).toBe(405);
  });
});

describe("model-aware routing from introspected /v1/models", () => {
  it("learns each worker's models and adapters from its /v1/models, then routes and refuses by them", async () => {
    const [lora, qwen] = await Promise.all([
      startSimWorker(LORA_WORKER),
      startSimWorker({ id: "qwen", timeScale: 0, flavor: "vllm", model: "qwen" }),
    ]);
    const router = await startTestRouter({
      workerUrls: [lora.url, qwen.url],
      enginePollIntervalSecs: 60,
    });
    try {
      const workers = router.context.registry.list();
      await waitFor(
        () => workers.every((w) => w.servedModels !== undefined),
        10_000,
        "models introspected",
      );
      const res = await postJson(`${router.url}/v1/completions`, {
        model: "sql",
        prompt: "SELECT",
        max_tokens: 1,
      });
      expect(res.status).toBe(200);
      expect(res.headers.get("x-sim-worker-id")).toBe("lora");
      await res.arrayBuffer();
      const missing = await postJson(`${router.url}/v1/completions`, {
        model: "mistral",
        prompt: "hi",
      });
      expect(missing.status).toBe(404);
      expect(((await missing.json()) as { error: { code: string } }).error.code).toBe(
        "model_not_found",
      );
    } finally {
      await router.stop(100);
      await Promise.all([lora.close(), qwen.close()]);
    }
  });
});
