import { describe, expect, it } from "vitest";
import {
  distinctPromptTokens,
  prepareWorkload,
  QUICK_PRESET,
} from "../../bench/lib/routing-workloads.js";
import { tokenize } from "../../sim/tokenizer.js";
import { openAiBody, type RequestSpec } from "../../sim/workloads.js";

describe("bench:routing cache-pressure preparation", () => {
  it("counts the working set as the distinct prompt tokens", () => {
    const a: RequestSpec = { id: "a", kind: "completion", prompt: "x".repeat(400), maxTokens: 1 };
    const b: RequestSpec = {
      id: "b",
      kind: "completion",
      prompt: `${"x".repeat(200)}${"y".repeat(200)}`,
      maxTokens: 1,
    };
    expect(distinctPromptTokens([a, a])).toBe(100);
    expect(distinctPromptTokens([a, b])).toBe(150);
  });

  it("sizes each worker's KV to its share of the working set, and pins each tenant to one worker in the oracle", () => {
    const w = prepareWorkload("cache-pressure", QUICK_PRESET);
    const share = QUICK_PRESET.cachePressure.kvShareOfWorkingSet;
    expect(w.kvCapacityTokens % 16).toBe(0);
    expect(w.kvCapacityTokens).toBeGreaterThanOrEqual(w.workingSetTokens * share);
    expect(w.kvCapacityTokens).toBeLessThan(w.workingSetTokens * share + 16);
    // The fleet holds less than the whole working set.
    expect(w.kvCapacityTokens * QUICK_PRESET.workers).toBeLessThan(w.workingSetTokens);
    for (const spec of w.specs) expect(w.oracle!(spec, 4)).toBe(spec.group! % 4);
    expect(prepareWorkload("shared-prefix", QUICK_PRESET).kvCapacityTokens).toBe(
      QUICK_PRESET.kvCapacityTokens,
    );
  });
});

describe("bench:routing multimodal preparation", () => {
  it("about half the chats send one of the images, ahead of the same instruction", () => {
    const w = prepareWorkload("multimodal", QUICK_PRESET);
    const withImage = w.specs.filter((s) => s.image !== undefined);
    expect(withImage.length / w.specs.length).toBeGreaterThan(0.35);
    expect(withImage.length / w.specs.length).toBeLessThan(0.65);
    expect(new Set(withImage.map((s) => s.image)).size).toBeLessThanOrEqual(20);
    const body = openAiBody(withImage[0]!) as { messages: { content: unknown }[] };
    expect(body.messages.at(-1)!.content).toEqual([
      { type: "image_url", image_url: { url: withImage[0]!.image } },
      { type: "text", text: withImage[0]!.messages!.at(-1)!.content },
    ]);
    // The oracle pins each image to one worker.
    const sameImage = withImage.filter((s) => s.image === withImage[0]!.image);
    expect(new Set(sameImage.map((s) => w.oracle!(s, 4))).size).toBe(1);
  });
});

describe("bench:routing offload preparation", () => {
  it("offloading vLLM engines: a GPU cache of about a quarter of the working set that still runs each worker's share of the clients and one more, a CPU tier of all of it", () => {
    const w = prepareWorkload("offload", QUICK_PRESET);
    expect(w.flavor).toBe("vllm");
    const workers = QUICK_PRESET.workers;
    expect(w.cpuTierTokens! * workers).toBeGreaterThanOrEqual(w.workingSetTokens);
    expect(w.kvCapacityTokens * workers).toBeLessThan(w.workingSetTokens * 0.3);
    // What a running request reserves in the engine: its prompt and every output token, in blocks.
    let largest = 0;
    for (const spec of w.specs) {
      const tokens = tokenize(spec.prompt!).length + spec.maxTokens;
      largest = Math.max(largest, Math.ceil(tokens / 16) * 16);
    }
    const clients = Math.ceil(w.concurrency! / workers) + 1;
    expect(w.kvCapacityTokens).toBeGreaterThanOrEqual(clients * largest);
  });
});
