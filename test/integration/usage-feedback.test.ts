import { afterEach, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import type { ApproximateIndex } from "../../src/index/approximate-index.js";
import type { RunningRouter } from "../../src/server.js";
import { filler } from "../helpers/cache-account.js";
import { postJson, startTestRouter } from "../helpers/router.js";

interface Usage {
  prompt_tokens: number;
  prompt_tokens_details?: { cached_tokens: number };
}

async function complete(url: string, prompt: string): Promise<Usage> {
  const res = await postJson(`${url}/v1/completions`, { prompt, max_tokens: 1 });
  expect(res.status).toBe(200);
  return ((await res.json()) as { usage: Usage }).usage;
}

/** Streams a chat completion with include_usage; returns the final usage chunk's usage. */
async function streamChat(url: string, content: string): Promise<Usage> {
  const res = await postJson(`${url}/v1/chat/completions`, {
    messages: [{ role: "user", content }],
    max_tokens: 2,
    stream: true,
    stream_options: { include_usage: true },
  });
  expect(res.status).toBe(200);
  const text = await res.text();
  const usageLine = text
    .split("\n\n")
    .map((event) => event.replace(/^data: /, ""))
    .filter((data) => data.startsWith("{"))
    .map((data) => JSON.parse(data) as { usage?: Usage | null })
    .find((chunk) => chunk.usage);
  return usageLine!.usage!;
}

async function metric(router: RunningRouter, name: string, worker: string): Promise<number> {
  const text = await (await fetch(`${router.url}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${name}{worker="${worker}"}`));
  return line === undefined ? 0 : Number(line.split(" ").pop());
}

describe("usage feedback from the engines' responses", () => {
  let sim: SimWorker | undefined;
  let router: RunningRouter | undefined;
  afterEach(async () => {
    await router?.stop(100);
    await sim?.close();
  });

  it("learns characters per token and counts engine tokens, streaming or not", async () => {
    sim = await startSimWorker({ id: "cpt", timeScale: 0 });
    router = await startTestRouter({ workerUrls: [sim.url] });
    const worker = router.context.registry.list()[0]!;
    expect(worker.charsPerToken).toBe(4);

    // The simulator's tokenizer makes 4-character tokens: a 3-character-per-token text gives 3.
    const prompt = filler("abc", 3000);
    const first = await complete(router.url, prompt);
    expect(worker.charsPerToken).toBeCloseTo(prompt.length / first.prompt_tokens, 5);
    expect(worker.charsPerTokenEstimate.samples).toBe(1);

    // Streamed twice: the second is a cache hit, reported in the final usage chunk.
    const streams = [await streamChat(router.url, prompt), await streamChat(router.url, prompt)];
    expect(worker.charsPerTokenEstimate.samples).toBe(3);
    expect(streams[1]!.prompt_tokens_details?.cached_tokens).toBeGreaterThan(0);

    let prompted = 0;
    let cached = 0;
    for (const usage of [first, ...streams]) {
      prompted += usage.prompt_tokens;
      cached += usage.prompt_tokens_details?.cached_tokens ?? 0;
    }
    expect(await metric(router, "radixgate_engine_prompt_tokens_total", worker.id)).toBe(prompted);
    expect(await metric(router, "radixgate_engine_cached_tokens_total", worker.id)).toBe(cached);
    const json = (await (await fetch(`${router.url}/workers`)).json()) as {
      workers: { chars_per_token: number }[];
    };
    expect(json.workers[0]!.chars_per_token).toBeGreaterThan(3);
    expect(json.workers[0]!.chars_per_token).toBeLessThan(4);
  });

  it("reads SGLang meta_info from a streamed /generate, and learns nothing from a batch", async () => {
    sim = await startSimWorker({ id: "generate", timeScale: 0 });
    router = await startTestRouter({ workerUrls: [sim.url] });
    const worker = router.context.registry.list()[0]!;
    const text = filler("gen", 2000);
    const streamed = await postJson(`${router.url}/generate`, {
      text,
      stream: true,
      sampling_params: { max_new_tokens: 3 },
    });
    expect(streamed.status).toBe(200);
    const events = (await streamed.text()).split("\n\n").filter((e) => e.startsWith("data: {"));
    const last = JSON.parse(events.at(-1)!.slice("data: ".length)) as {
      meta_info: { prompt_tokens: number };
    };
    expect(worker.charsPerTokenEstimate.samples).toBe(1);
    expect(worker.charsPerToken).toBeCloseTo(text.length / last.meta_info.prompt_tokens, 5);

    const batch = await postJson(`${router.url}/generate`, {
      text: [filler("one", 800), filler("two", 800)],
      sampling_params: { max_new_tokens: 1 },
    });
    expect(batch.status).toBe(200);
    await batch.arrayBuffer();
    expect(worker.charsPerTokenEstimate.samples).toBe(1);
    // Still counted as engine tokens.
    expect(await metric(router, "radixgate_engine_prompt_tokens_total", worker.id)).toBeGreaterThan(
      last.meta_info.prompt_tokens,
    );
  });

  it("trims what the engine evicted when it reports clearly fewer cached tokens", async () => {
    sim = await startSimWorker({ id: "evicting", timeScale: 0, kvCapacityTokens: 2048 });
    router = await startTestRouter({ workerUrls: [sim.url], prefixIndex: "approx" });
    const worker = router.context.registry.list()[0]!;
    const tree = (router.context.index as ApproximateIndex).treeOf(worker.id)!;
    const shared = filler("shared", 4000);
    const x = `X${filler("x", 300)}`;
    const y = `Y${filler("y", 300)}`;
    const w = `W${filler("w", 300)}`;

    await complete(router.url, shared + x);
    const warm = await complete(router.url, shared + y);
    // The engine held the shared prefix: the index was right, nothing to correct.
    expect(warm.prompt_tokens_details!.cached_tokens).toBeGreaterThan(900);
    expect(worker.feedbackCorrections).toBe(0);
    expect(tree.match(shared + x)).toBe((shared + x).length);

    // Someone else fills the engine's KV cache: the shared prefix is evicted there.
    const res = await postJson(`${sim.url}/v1/completions`, {
      prompt: filler("other", 7900),
      max_tokens: 1,
    });
    expect(res.status).toBe(200);
    await res.arrayBuffer();

    const cold = await complete(router.url, shared + w);
    expect(cold.prompt_tokens_details!.cached_tokens).toBeLessThan(500);
    expect(worker.feedbackCorrections).toBe(1);
    expect(await metric(router, "radixgate_feedback_corrections_total", worker.id)).toBe(1);
    // The branches below the evicted prefix are forgotten; the text just computed stays.
    expect(tree.match(shared + w)).toBe((shared + w).length);
    expect(tree.match(shared + x)).toBeLessThanOrEqual(shared.length);
    expect(tree.match(shared + y)).toBeLessThanOrEqual(shared.length);
  });
});
