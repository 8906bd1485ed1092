import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { planFromArgs } from "../../sim/cli.js";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import { json, post } from "./http-helpers.js";

const SYSTEM = "You are a precise assistant that answers questions about databases. ".repeat(8);

let vllm: SimWorker;
let sglang: SimWorker;

beforeAll(async () => {
  const models = { model: "llama", modelAliases: ["llama-alias"], loraAdapters: ["sql", "chat"] };
  vllm = await startSimWorker({ id: "v", timeScale: 0, flavor: "vllm", ...models });
  sglang = await startSimWorker({ id: "s", timeScale: 0, flavor: "sglang", ...models });
});
afterAll(async () => {
  await Promise.all([vllm.close(), sglang.close()]);
});

interface Completion {
  model: string;
  usage: { prompt_tokens: number; prompt_tokens_details: { cached_tokens: number } };
}

async function complete(w: SimWorker, model: string | undefined, prompt: string) {
  const res = await post(w.url, "/v1/completions", { model, prompt, max_tokens: 1 });
  return { status: res.status, body: (await res.json()) as Completion };
}

describe("simulated workers serving several models and adapters", () => {
  it("vLLM lists every served name and adapter, adapters with their parent", async () => {
    const list = (await json(fetch(`${vllm.url}/v1/models`))) as {
      data: { id: string; parent: string | null; root: string }[];
    };
    expect(list.data.map((m) => [m.id, m.parent])).toEqual([
      ["llama", null],
      ["llama-alias", null],
      ["sql", "llama"],
      ["chat", "llama"],
    ]);
    expect(list.data[2]!.root).toBe("/adapters/sql");
  });

  it("SGLang lists its served name only", async () => {
    const list = (await json(fetch(`${sglang.url}/v1/models`))) as { data: { id: string }[] };
    expect(list.data.map((m) => m.id)).toEqual(["llama"]);
  });

  it("vLLM answers 404 for a model it does not serve", async () => {
    const { status, body } = await complete(vllm, "mistral", "hello");
    expect(status).toBe(404);
    expect(JSON.stringify(body)).toContain("does not exist");
  });

  it("SGLang takes base:adapter and refuses an adapter it has not loaded", async () => {
    const ok = await complete(sglang, "llama:sql", "hello there");
    expect(ok.status).toBe(200);
    expect(ok.body.model).toBe("llama:sql");
    expect((await complete(sglang, "llama:nope", "hello")).status).toBe(400);
    const generate = await post(sglang.url, "/generate", {
      text: "hello",
      lora_path: "chat",
      sampling_params: { max_new_tokens: 1 },
    });
    expect(generate.status).toBe(200);
    await generate.arrayBuffer();
  });

  it.each([
    ["vllm", () => vllm, "sql", "chat"],
    ["sglang", () => sglang, "llama:sql", "llama:chat"],
  ])(
    "%s keeps each adapter's KV apart from the base model's and the other adapters'",
    async (_, worker, a, b) => {
      const w = worker();
      const prompt = `${SYSTEM}${a}`;
      expect((await complete(w, a, prompt)).body.usage.prompt_tokens_details.cached_tokens).toBe(0);
      const again = await complete(w, a, prompt);
      expect(again.body.usage.prompt_tokens_details.cached_tokens).toBeGreaterThan(0);
      expect((await complete(w, b, prompt)).body.usage.prompt_tokens_details.cached_tokens).toBe(0);
      expect(
        (await complete(w, "llama", prompt)).body.usage.prompt_tokens_details.cached_tokens,
      ).toBe(0);
    },
  );

  it("the CLI takes --model-aliases and --lora-adapters as comma-separated lists", () => {
    const plan = planFromArgs(["--lora-adapters", "sql,chat", "--model-aliases", "a"]);
    expect(plan.workers[0]).toMatchObject({ loraAdapters: ["sql", "chat"], modelAliases: ["a"] });
    expect(() => planFromArgs(["--lora-adapters", "sql,,chat"], { writeErr: () => {} })).toThrow();
  });
});
