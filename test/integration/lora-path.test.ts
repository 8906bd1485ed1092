import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import type { RunningRouter } from "../../src/server.js";
import { matchRate, postJson, startTestRouter } from "../helpers/router.js";

/**
 * Issue 19, item 2: SGLang's /generate `lora_path` is the adapter, so it keys the prefix index as
 * chat's `base:adapter` does. Before, a text sent with an adapter and the same text without it
 * shared one tree: the router claimed match 1.00 where the engine had 0 cached tokens (an
 * adapter's KV is its own).
 */

const TEXT = "Translate the question into SQL for the orders database, one statement only. ".repeat(
  6,
);

interface GenerateAnswer {
  meta_info: { cached_tokens: number };
}

describe("SGLang /generate lora_path keys the prefix index by adapter", () => {
  let sim: SimWorker;
  let router: RunningRouter;

  beforeAll(async () => {
    sim = await startSimWorker({ id: "sg", timeScale: 0, model: "llama", loraAdapters: ["sql"] });
    router = await startTestRouter({ workerUrls: [sim.url] });
  });
  afterAll(async () => {
    await router.stop(100);
    await sim.close();
  });

  async function generate(body: Record<string, unknown>) {
    const res = await postJson(`${router.url}/generate`, {
      ...body,
      sampling_params: { max_new_tokens: 1 },
    });
    expect(res.status).toBe(200);
    const answer = (await res.json()) as GenerateAnswer | GenerateAnswer[];
    const cached = (Array.isArray(answer) ? answer : [answer]).map(
      (a) => a.meta_info.cached_tokens,
    );
    return { match: matchRate(res), cached };
  }

  it("the same text without the adapter claims nothing, as the engine caches nothing", async () => {
    const text = `single ${TEXT}`;
    expect((await generate({ text, lora_path: "sql" })).match).toBe(0);
    const base = await generate({ text });
    expect(base.cached).toEqual([0]);
    expect(base.match).toBe(0);
    // With the adapter again: the router's claim and the engine's cache agree.
    const again = await generate({ text, lora_path: "sql" });
    expect(again.match).toBe(1);
    expect(again.cached[0]).toBeGreaterThan(0);
  });

  it("a batch's per-item lora_path list keys it like one adapter; a mixed list apart from both", async () => {
    const text = [`first ${TEXT}`, `second ${TEXT}`];
    expect((await generate({ text, lora_path: ["sql", "sql"] })).match).toBe(0);
    const base = await generate({ text, lora_path: [null, null] });
    expect(base.match).toBe(0);
    expect(base.cached).toEqual([0, 0]);
    expect((await generate({ text, lora_path: ["sql", null] })).match).toBe(0);
    const again = await generate({ text, lora_path: ["sql", "sql"] });
    expect(again.match).toBe(1);
    expect(again.cached.every((c) => c > 0)).toBe(true);
  });

  it("the adapter in SGLang's chat syntax and a chat lora_path key alike", async () => {
    const messages = [{ role: "user", content: `chat ${TEXT}` }];
    const send = async (body: Record<string, unknown>) => {
      const res = await postJson(`${router.url}/v1/chat/completions`, {
        messages,
        max_tokens: 1,
        ...body,
      });
      expect(res.status).toBe(200);
      await res.arrayBuffer();
      return matchRate(res);
    };
    expect(await send({ lora_path: "sql" })).toBe(0);
    expect(await send({})).toBe(0);
    expect(await send({ model: "llama", lora_path: "sql" })).toBe(1);
  });
});

/**
 * Distinct adapter names each root a tree of the index, and each name arrives with the request:
 * 60 names of 5 MB once pinned 220 MB outside the tree budget. Names are bounded in length, and
 * a root counts in its workers' budgets, so distinct names are evicted like cold prefixes.
 */
describe("lora_path names are bounded and counted in the index budget", () => {
  const BUDGET = 20_000;
  const NAME_CHARS = 4_000;
  const names = Array.from({ length: 30 }, (_, i) => `${i}-${"a".repeat(NAME_CHARS)}`);
  let sim: SimWorker;
  let router: RunningRouter;

  beforeAll(async () => {
    sim = await startSimWorker({ id: "sg", timeScale: 0, model: "llama", loraAdapters: names });
    router = await startTestRouter({ workerUrls: [sim.url], maxTreeSize: BUDGET });
  });
  afterAll(async () => {
    await router.stop(100);
    await sim.close();
  });

  async function metric(name: string): Promise<number> {
    const text = await (await fetch(`${router.url}/metrics`)).text();
    const line = text.split("\n").find((l) => l.startsWith(name));
    return Number(line?.split(" ").at(-1) ?? Number.NaN);
  }

  it("a name longer than a path is refused with 400 naming lora_path", async () => {
    for (const lora_path of ["x".repeat(5 * 1024 * 1024), ["sql", "y".repeat(5000)]]) {
      const res = await postJson(`${router.url}/generate`, {
        text: "hello",
        lora_path,
        sampling_params: { max_new_tokens: 1 },
      });
      expect(res.status).toBe(400);
      const body = (await res.json()) as { error: { code: string; message: string } };
      expect(body.error.code).toBe("invalid_request");
      expect(body.error.message).toContain("lora_path");
    }
  });

  it("distinct names cost their length: the tree stays within its budget and evicts", async () => {
    for (const lora_path of names) {
      const res = await postJson(`${router.url}/generate`, {
        text: "hello",
        lora_path,
        sampling_params: { max_new_tokens: 1 },
      });
      expect(res.status).toBe(200);
      await res.arrayBuffer();
    }
    // 30 names of 4 kB each, 5 characters of text each: before, the tree held 150 characters.
    expect(await metric("radixgate_tree_evicted_characters_total")).toBeGreaterThan(0);
    const held = await metric("radixgate_tree_characters");
    expect(held).toBeGreaterThan(NAME_CHARS);
    expect(held).toBeLessThanOrEqual(BUDGET);
  });
});
