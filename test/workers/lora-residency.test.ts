import { describe, expect, it } from "vitest";
import { readAdapterIds } from "../../src/engines/models-list.js";
import { LoraResidency } from "../../src/workers/lora-residency.js";

function residency(adapters: string[]) {
  const r = new LoraResidency();
  r.adapters = new Set(adapters);
  return r;
}

describe("LoraResidency", () => {
  it("the engine's bound of most recently routed adapters are loaded, as its LRU keeps them", () => {
    const r = residency(["a", "b", "c"]);
    r.report({ active: [], maxLoras: 2 }, 0);
    for (const name of ["a", "b", "c"]) r.routed(name);
    expect(["a", "b", "c"].map((n) => r.resident(n, 0, "vllm"))).toEqual([false, true, true]);
    r.routed("a");
    expect(["a", "b", "c"].map((n) => r.resident(n, 0, "vllm"))).toEqual([true, false, true]);
  });

  it("an adapter the engine reports running or waiting is loaded, until the report is stale", () => {
    const r = residency(["a", "b"]);
    r.report({ active: ["b"], maxLoras: 1 }, 1000);
    r.routed("a");
    expect(r.resident("b", 1500, "vllm", 1000)).toBe(true);
    expect(r.resident("b", 5000, "vllm", 1000)).toBe(false);
  });

  it("without a reported bound, the engine's default: vLLM 1, SGLang 8; unknown engine: unknown", () => {
    const r = residency(["a", "b"]);
    r.routed("a");
    r.routed("b");
    expect(r.resident("a", 0, "vllm")).toBe(false);
    expect(r.resident("a", 0, "sglang")).toBe(true);
    expect(r.resident("a", 0, undefined)).toBeUndefined();
  });

  it("says nothing of a name that is not one of the worker's adapters (a base model)", () => {
    const r = residency(["a"]);
    r.routed("base");
    expect(r.resident("base", 0, "vllm")).toBeUndefined();
    expect(new LoraResidency().resident("a", 0, "vllm")).toBeUndefined();
  });

  it("readAdapterIds: the entries vLLM lists with a parent", () => {
    const list = {
      data: [
        { id: "base", parent: null },
        { id: "sql", parent: "base" },
        { id: "self", parent: "self" },
      ],
    };
    expect([...readAdapterIds(list)]).toEqual(["sql"]);
  });
});
