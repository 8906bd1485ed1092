import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import type { RunningRouter } from "../../src/server.js";
import { postJson, startTestRouter, waitFor } from "../helpers/router.js";

const PATHS = ["sql=/loras/sql", "chat=/loras/chat", "code=/loras/code"];

/** Which sims list each adapter now (their own /v1/models, as the engine answers it). */
async function holders(sims: SimWorker[]): Promise<Record<string, string[]>> {
  const out: Record<string, string[]> = {};
  for (const sim of sims) {
    const list = (await (await fetch(`${sim.url}/v1/models`)).json()) as {
      data: { id: string; parent: string | null }[];
    };
    for (const card of list.data) {
      if (card.parent !== null) out[card.id] = [...(out[card.id] ?? []), sim.id];
    }
  }
  return out;
}

function loads(sims: SimWorker[], path: string): number {
  return sims.reduce((n, s) => n + (s.stats().endpoints[path] ?? 0), 0);
}

async function engineKnown(router: RunningRouter): Promise<void> {
  await waitFor(() => router.context.registry.list().every((w) => w.engine !== undefined));
}

describe("--lora-load-on-demand in front of vLLM", () => {
  let sims: SimWorker[];
  let router: RunningRouter;

  beforeAll(async () => {
    sims = await Promise.all(
      ["v0", "v1"].map((id) =>
        startSimWorker({
          id,
          flavor: "vllm",
          timeScale: 0,
          model: "llama",
          maxLoras: 2,
          loraLoadMs: 20,
          loraRuntimeUpdates: true,
        }),
      ),
    );
    router = await startTestRouter({
      workerUrls: sims.map((s) => s.url),
      enginePollIntervalSecs: 60,
      loraLoadOnDemand: true,
      loraPaths: PATHS,
      loraMaxAdaptersPerWorker: 1,
    });
    await engineKnown(router);
  });
  afterAll(async () => {
    await router.stop(100);
    await Promise.all(sims.map((s) => s.close()));
  });

  const complete = (model: string) =>
    postJson(`${router.url}/v1/completions`, { model, prompt: "hello there", max_tokens: 1 });

  it("loads an adapter nobody serves once, for concurrent requests, then routes them to it", async () => {
    const answers = await Promise.all(Array.from({ length: 5 }, () => complete("sql")));
    expect(answers.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    expect(loads(sims, "/v1/load_lora_adapter")).toBe(1);
    const held = await holders(sims);
    expect(held.sql).toHaveLength(1);
    // Every request went to the worker that loaded it.
    const holder = sims.find((s) => s.id === held.sql![0])!;
    expect(holder.stats().completed).toBe(5);
    // The fleet's /v1/models and the admin view show it.
    const models = (await (await fetch(`${router.url}/v1/models`)).json()) as {
      data: { id: string }[];
    };
    expect(models.data.map((m) => m.id)).toContain("sql");
    const workers = (await (await fetch(`${router.url}/workers`)).json()) as {
      workers: { lora: { loaded_on_demand: string[] } }[];
    };
    expect(workers.workers.flatMap((w) => w.lora.loaded_on_demand)).toEqual(["sql"]);
  });

  it("puts the next adapter on the worker with room, then unloads the least used at the bound", async () => {
    expect((await complete("chat")).status).toBe(200);
    let held = await holders(sims);
    expect(held.chat).toHaveLength(1);
    expect(held.chat![0]).not.toBe(held.sql![0]);
    // sql is used after chat: chat is the least used when code needs a slot.
    expect((await complete("sql")).status).toBe(200);
    expect((await complete("code")).status).toBe(200);
    held = await holders(sims);
    expect(held.chat).toBeUndefined();
    expect(held.sql).toHaveLength(1);
    expect(held.code).toHaveLength(1);
    expect(loads(sims, "/v1/unload_lora_adapter")).toBe(1);
  });

  it("leaves a name outside --lora-paths to the engines' answer (404)", async () => {
    const res = await complete("nope");
    expect(res.status).toBe(404);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("model_not_found");
  });
});

describe("--lora-load-on-demand refusals and SGLang", () => {
  it("answers an OpenAI-shaped 502 naming vLLM's switch when the engine does not serve loading", async () => {
    const sim = await startSimWorker({
      id: "locked",
      flavor: "vllm",
      timeScale: 0,
      model: "llama",
    });
    const router = await startTestRouter({
      workerUrls: [sim.url],
      enginePollIntervalSecs: 60,
      loraLoadOnDemand: true,
      loraPaths: PATHS,
    });
    try {
      await engineKnown(router);
      const res = await postJson(`${router.url}/v1/completions`, { model: "sql", prompt: "hi" });
      expect(res.status).toBe(502);
      const body = (await res.json()) as { error: { code: string; message: string } };
      expect(body.error.code).toBe("lora_load_failed");
      expect(body.error.message).toContain("VLLM_ALLOW_RUNTIME_LORA_UPDATING");
    } finally {
      await router.stop(100);
      await sim.close();
    }
  });

  it("SGLang: loads a lora_path adapter, and unloads to stay within --max-loaded-loras", async () => {
    const sim = await startSimWorker({ id: "sg", timeScale: 0, model: "llama", maxLoadedLoras: 1 });
    const router = await startTestRouter({
      workerUrls: [sim.url],
      enginePollIntervalSecs: 60,
      loraLoadOnDemand: true,
      loraPaths: PATHS,
    });
    try {
      await engineKnown(router);
      await waitFor(() => router.context.registry.list()[0]!.lora.maxLoaded === 1);
      const generate = (lora: string) =>
        postJson(`${router.url}/generate`, {
          text: "hello",
          lora_path: lora,
          sampling_params: { max_new_tokens: 1 },
        });
      expect((await generate("sql")).status).toBe(200);
      // Known loaded now: no second load for the same adapter.
      expect((await generate("sql")).status).toBe(200);
      expect(sim.stats().endpoints["/load_lora_adapter"]).toBe(1);
      expect((await generate("chat")).status).toBe(200);
      expect(sim.stats().endpoints["/unload_lora_adapter"]).toBe(1);
      expect(sim.stats().endpoints["/load_lora_adapter"]).toBe(2);
    } finally {
      await router.stop(100);
      await sim.close();
    }
  });
});
