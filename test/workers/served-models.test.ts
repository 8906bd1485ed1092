import { describe, expect, it } from "vitest";
import {
  admitted,
  indexKey,
  type ModelRoutingMode,
  planModel,
  type ServingWorker,
} from "../../src/workers/served-models.js";

const unknown: ServingWorker = { servedModels: undefined };
const llama: ServingWorker = { servedModels: new Set(["llama"]), engine: "vllm" };
const llamaLora: ServingWorker = {
  servedModels: new Set(["llama", "sql-lora", "chat-lora"]),
  engine: "vllm",
};
const qwen: ServingWorker = { servedModels: new Set(["qwen"]), engine: "vllm" };
const sglangLlama: ServingWorker = { servedModels: new Set(["llama"]), engine: "sglang" };
const sglangQwen: ServingWorker = { servedModels: new Set(["qwen"]), engine: "sglang" };
/** Lists models, engine not recognised: treated as refusing names it does not list. */
const other: ServingWorker = { servedModels: new Set(["llama"]) };

function candidates(fleet: ServingWorker[], model: string | undefined, mode: ModelRoutingMode) {
  return admitted(fleet, planModel(fleet, model, mode));
}

describe.each(["strict", "engine"] as const)("served models (--model-routing %s)", (mode) => {
  it("a name some worker lists goes to those workers and to workers whose list is unknown", () => {
    const fleet = [llama, qwen, unknown, llamaLora, sglangQwen];
    expect(candidates(fleet, "qwen", mode)).toEqual([qwen, unknown, sglangQwen]);
    expect(candidates(fleet, "sql-lora", mode)).toEqual([unknown, llamaLora]);
    expect(planModel(fleet, "qwen", mode).route).toBe("listed");
  });

  it("accepts SGLang's base:adapter syntax for a listed base", () => {
    const fleet = [llama, qwen];
    expect(candidates(fleet, "llama:sql", mode)).toEqual([llama]);
    // ":sql" and "llama:" are not the syntax: no worker lists them.
    expect(planModel(fleet, ":sql", mode).route).toBe("not_found");
    expect(planModel(fleet, "llama:", mode).route).toBe("not_found");
  });

  it("an unnamed model goes anywhere; the same array when every worker is admitted", () => {
    const fleet = [llama, qwen];
    expect(candidates(fleet, undefined, mode)).toBe(fleet);
    expect(candidates([llama, llamaLora], "llama", mode)).toEqual([llama, llamaLora]);
    expect(planModel(fleet, undefined, mode).route).toBe("unnamed");
  });

  it("a name no worker lists: 404 when every list is known and no worker takes any name", () => {
    expect(planModel([llama, qwen], "mistral", mode).route).toBe("not_found");
    expect(planModel([llama, other], "mistral", mode).route).toBe("not_found");
    expect(planModel([llama, unknown], "mistral", mode).route).toBe("any_name");
    expect(candidates([llama, unknown], "mistral", mode)).toEqual([unknown]);
    expect(planModel([], "mistral", mode).route).toBe("any_name");
  });

  it("says why the model leaves a worker out", () => {
    const plan = planModel([llama, qwen], "qwen", mode);
    expect(plan.exclusion(qwen)).toBeUndefined();
    expect(plan.exclusion(llama)).toBe("does not list 'qwen', which another worker lists");
  });
});

describe("served models: names as the engines treat them (--model-routing engine)", () => {
  it("a name no worker lists goes to SGLang workers, which run their model under any name", () => {
    const fleet = [llama, sglangLlama, sglangQwen];
    expect(candidates(fleet, "default", "engine")).toEqual([sglangLlama, sglangQwen]);
    const plan = planModel(fleet, "default", "engine");
    expect(plan.route).toBe("any_name");
    expect(plan.exclusion(llama)).toBe(
      "does not list 'default', and vllm refuses names it does not list",
    );
  });

  it("a name a worker lists still goes only there, SGLang or not", () => {
    expect(candidates([llama, sglangQwen], "llama", "engine")).toEqual([llama]);
    expect(candidates([sglangLlama, sglangQwen], "qwen", "engine")).toEqual([sglangQwen]);
  });

  it("strict keeps today's 404 for SGLang workers too", () => {
    expect(planModel([sglangLlama], "default", "strict").route).toBe("not_found");
    expect(planModel([sglangLlama], "default", "engine").route).toBe("any_name");
  });
});

describe("index keys", () => {
  it("keys the index by model only where KV is kept apart (adapters, several models)", () => {
    // One model per worker, whatever its name: one shared tree, as before.
    expect(indexKey([llama, qwen], "llama")).toBeUndefined();
    expect(indexKey([unknown], "anything")).toBeUndefined();
    expect(indexKey([llama], undefined)).toBeUndefined();
    expect(indexKey([sglangLlama], "default")).toBeUndefined();
    // An adapter, or the base of a worker that serves adapters: their own trees.
    expect(indexKey([llamaLora], "sql-lora")).toBe("sql-lora");
    expect(indexKey([llamaLora], "llama")).toBe("llama");
    expect(indexKey([llama], "llama:sql")).toBe("llama:sql");
  });

  it("an SGLang lora_path keys the index apart, per adapter; the model's own :adapter wins", () => {
    const base = indexKey([sglangLlama], undefined);
    const sql = indexKey([sglangLlama], undefined, "sql");
    expect(sql).toBe("sql");
    expect(base).toBeUndefined();
    expect(indexKey([sglangLlama], "llama", "sql")).toBe(sql);
    expect(indexKey([sglangLlama], undefined, "chat")).not.toBe(sql);
    expect(indexKey([sglangLlama], "llama:chat", "sql")).toBe("llama:chat");
  });
});
