import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import { parseExposition } from "../../src/engines/prometheus-text.js";
import { readSglangMetrics } from "../../src/engines/sglang-metrics.js";
import { post } from "./http-helpers.js";

let vllm: SimWorker;
let vllmLocked: SimWorker;
let sglang: SimWorker;

beforeAll(async () => {
  const base = { timeScale: 0, model: "llama", loraAdapters: ["sql"], maxLoras: 2 };
  vllm = await startSimWorker({ ...base, flavor: "vllm", loraRuntimeUpdates: true });
  vllmLocked = await startSimWorker({ ...base, flavor: "vllm" });
  sglang = await startSimWorker({ ...base, flavor: "sglang", maxLoadedLoras: 2 });
});
afterAll(async () => {
  await Promise.all([vllm.close(), vllmLocked.close(), sglang.close()]);
});

async function ids(w: SimWorker): Promise<[string, string | null, string][]> {
  const list = (await (await fetch(`${w.url}/v1/models`)).json()) as {
    data: { id: string; parent: string | null; root: string }[];
  };
  return list.data.map((m) => [m.id, m.parent, m.root]);
}

describe("the simulated engines' runtime LoRA routes", () => {
  it("vLLM loads and unloads with its texts and errors; the adapter serves once listed", async () => {
    const load = { lora_name: "chat", lora_path: "/loras/chat" };
    const ok = await post(vllm.url, "/v1/load_lora_adapter", load);
    expect([ok.status, await ok.text()]).toEqual([
      200,
      "Success: LoRA adapter 'chat' added successfully.",
    ]);
    expect(await ids(vllm)).toContainEqual(["chat", "llama", "/loras/chat"]);
    const served = await post(vllm.url, "/v1/completions", { model: "chat", prompt: "hi" });
    expect(served.status).toBe(200);

    const again = await post(vllm.url, "/v1/load_lora_adapter", load);
    expect(again.status).toBe(400);
    expect(((await again.json()) as { error: { type: string } }).error.type).toBe(
      "InvalidUserInput",
    );
    const missing = await post(vllm.url, "/v1/load_lora_adapter", { lora_name: "x" });
    expect(missing.status).toBe(400);

    const gone = await post(vllm.url, "/v1/unload_lora_adapter", { lora_name: "chat" });
    expect([gone.status, await gone.text()]).toEqual([
      200,
      "Success: LoRA adapter 'chat' removed successfully.",
    ]);
    const unknown = await post(vllm.url, "/v1/unload_lora_adapter", { lora_name: "chat" });
    expect(unknown.status).toBe(404);
    expect(JSON.stringify(await unknown.json())).toContain("cannot be found");
    const after = await post(vllm.url, "/v1/completions", { model: "chat", prompt: "hi" });
    expect(after.status).toBe(404);
  });

  it("vLLM without VLLM_ALLOW_RUNTIME_LORA_UPDATING does not serve the routes", async () => {
    const res = await post(vllmLocked.url, "/v1/load_lora_adapter", {
      lora_name: "chat",
      lora_path: "/loras/chat",
    });
    expect(res.status).toBe(404);
    expect((await post(sglang.url, "/v1/load_lora_adapter", {})).status).toBe(404);
    expect((await post(vllm.url, "/load_lora_adapter", {})).status).toBe(404);
  });

  it("SGLang answers LoRAUpdateOutput and refuses loads past --max-loaded-loras", async () => {
    const ok = await post(sglang.url, "/load_lora_adapter", {
      lora_name: "chat",
      lora_path: "/loras/chat",
    });
    expect(ok.status).toBe(200);
    expect(await ok.json()).toEqual({
      success: true,
      error_message: null,
      loaded_adapters: { sql: "/adapters/sql", chat: "/loras/chat" },
    });
    const served = await post(sglang.url, "/generate", { text: "hi", lora_path: "chat" });
    expect(served.status).toBe(200);

    const full = await post(sglang.url, "/load_lora_adapter", {
      lora_name: "code",
      lora_path: "/loras/code",
    });
    expect(full.status).toBe(400);
    const refusal = (await full.json()) as { success: boolean; error_message: string };
    expect(refusal.success).toBe(false);
    expect(refusal.error_message).toContain("Maximum number of loaded LoRA adapters is 2");

    const gone = await post(sglang.url, "/unload_lora_adapter", { lora_name: "chat" });
    expect([gone.status, ((await gone.json()) as { success: boolean }).success]).toEqual([
      200,
      true,
    ]);
    const unknown = await post(sglang.url, "/unload_lora_adapter", { lora_name: "chat" });
    expect(unknown.status).toBe(400);
    expect(((await unknown.json()) as { error_message: string }).error_message).toContain(
      "does not exist",
    );
    const refused = await post(sglang.url, "/generate", { text: "hi", lora_path: "chat" });
    expect(refused.status).toBe(400);
  });

  it("SGLang's metrics show its LoRA pool, which the router reads as its slot bound", async () => {
    const text = await (await fetch(`${sglang.url}/metrics`)).text();
    expect(text).toContain("sglang:lora_pool_slots_total 2.0");
    expect(readSglangMetrics(parseExposition(text))?.lora?.maxLoras).toBe(2);
  });
});
