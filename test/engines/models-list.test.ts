import { describe, expect, it } from "vitest";
import { readModelsList, readModelsOwner } from "../../src/engines/models-list.js";
import { VLLM_MODELS_WITH_LORA } from "./samples.js";

describe("readModelsList", () => {
  it("lists base models and LoRA adapters", () => {
    expect(readModelsList(VLLM_MODELS_WITH_LORA)).toEqual(
      new Set(["meta-llama/Llama-3.1-8B-Instruct", "sql-lora"]),
    );
  });

  it("an empty list means unknown (the worker is taken to serve anything)", () => {
    expect(readModelsList({ object: "list", data: [] })).toBeUndefined();
  });

  it("skips entries without a string id", () => {
    expect(readModelsList({ data: [{ id: 3 }, {}, null, { id: "m" }] })).toEqual(new Set(["m"]));
  });

  it.each([null, {}, { data: "x" }, []])("refuses %j with a TypeError", (body) => {
    expect(() => readModelsList(body)).toThrow(TypeError);
  });
});

describe("readModelsOwner: the engine behind a model list", () => {
  it("reads the owned_by each engine writes into its cards", () => {
    expect(readModelsOwner({ data: [{ id: "m", owned_by: "vllm" }] })).toBe("vllm");
    expect(readModelsOwner({ data: [{ id: "m", owned_by: "sglang" }] })).toBe("sglang");
  });

  it("any other owner, or no list, says nothing", () => {
    for (const body of [{ data: [{ id: "m", owned_by: "openai" }] }, { data: [] }, null, {}]) {
      expect(readModelsOwner(body)).toBeUndefined();
    }
  });
});
