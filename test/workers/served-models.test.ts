import { describe, expect, it } from "vitest";
import { indexModel, noWorkerServes, servingCandidates } from "../../src/workers/served-models.js";

const unknown = { servedModels: undefined };
const llama = { servedModels: new Set(["llama"]) };
const llamaLora = { servedModels: new Set(["llama", "sql-lora", "chat-lora"]) };
const qwen = { servedModels: new Set(["qwen"]) };

/** One worker serves the model: it stays a candidate for it. */
function servesModel(worker: { servedModels: ReadonlySet<string> | undefined }, model?: string) {
  return servingCandidates([worker], model).length === 1;
}

describe("served models", () => {
  it("a worker serves what it lists; an unknown list or an unnamed model serves anything", () => {
    expect(servesModel(llama, "llama")).toBe(true);
    expect(servesModel(llama, "qwen")).toBe(false);
    expect(servesModel(unknown, "qwen")).toBe(true);
    expect(servesModel(qwen, undefined)).toBe(true);
  });

  it("accepts SGLang's base:adapter syntax for a listed base", () => {
    expect(servesModel(llama, "llama:sql")).toBe(true);
    expect(servesModel(qwen, "llama:sql")).toBe(false);
    expect(servesModel(llama, ":sql")).toBe(false);
    expect(servesModel(llama, "llama:")).toBe(false);
  });

  it("filters candidates to the workers serving the model", () => {
    const fleet = [llama, qwen, unknown, llamaLora];
    expect(servingCandidates(fleet, "qwen")).toEqual([qwen, unknown]);
    expect(servingCandidates(fleet, "sql-lora")).toEqual([unknown, llamaLora]);
    expect(servingCandidates(fleet, undefined)).toBe(fleet);
    const all = [llama, llamaLora];
    expect(servingCandidates(all, "llama")).toBe(all);
  });

  it("no worker serves a model only when every list is known and none has it", () => {
    expect(noWorkerServes([llama, qwen], "mistral")).toBe(true);
    expect(noWorkerServes([llama, unknown], "mistral")).toBe(false);
    expect(noWorkerServes([llama, qwen], "qwen")).toBe(false);
    expect(noWorkerServes([], "mistral")).toBe(false);
    expect(noWorkerServes([llama], undefined)).toBe(false);
  });

  it("keys the index by model only where KV is kept apart (adapters, several models)", () => {
    // One model per worker, whatever its name: one shared tree, as before.
    expect(indexModel([llama, qwen], "llama")).toBeUndefined();
    expect(indexModel([unknown], "anything")).toBeUndefined();
    expect(indexModel([llama], undefined)).toBeUndefined();
    // An adapter, or the base of a worker that serves adapters: their own trees.
    expect(indexModel([llamaLora], "sql-lora")).toBe("sql-lora");
    expect(indexModel([llamaLora], "llama")).toBe("llama");
    expect(indexModel([llama], "llama:sql")).toBe("llama:sql");
  });
});
