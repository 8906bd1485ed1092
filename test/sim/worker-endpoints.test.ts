import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { imageText } from "../../sim/media.js";
import { generatedText } from "../../sim/output-text.js";
import { renderChat } from "../../sim/template.js";
import { tokenize } from "../../sim/tokenizer.js";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import { multiTurnChat, openAiBody, promptTextOf } from "../../sim/workloads.js";
import { json, type Payload, post, sseData } from "./http-helpers.js";

const LONG_SYSTEM = "You are a careful assistant who answers in full sentences. ".repeat(20);

let w: SimWorker;
let v: SimWorker;

beforeAll(async () => {
  w = await startSimWorker({ id: "sg1", timeScale: 0 });
  v = await startSimWorker({ id: "vl1", timeScale: 0, flavor: "vllm", model: "test-model" });
});

afterAll(async () => {
  await Promise.all([w.close(), v.close()]);
});

describe("worker identity", () => {
  it("listens on 127.0.0.1 and reports its id, url and port", () => {
    expect(w.id).toBe("sg1");
    expect(w.url).toBe(`http://127.0.0.1:${w.port}`);
    expect(w.port).toBeGreaterThan(0);
  });

  it("defaults its id to sim-<port>", async () => {
    const anon = await startSimWorker({ timeScale: 0 });
    try {
      expect(anon.id).toBe(`sim-${anon.port}`);
    } finally {
      await anon.close();
    }
  });

  it("tags every response with x-sim-worker-id, errors and /health included", async () => {
    const responses = await Promise.all([
      fetch(`${w.url}/health`),
      fetch(`${w.url}/v1/models`),
      fetch(`${w.url}/metrics`),
      fetch(`${w.url}/nope`),
      fetch(`${w.url}/v1/chat/completions`), // GET: 405
      post(w.url, "/v1/chat/completions", { messages: [] }), // 400
      post(w.url, "/v1/completions", "{not json"),
      post(w.url, "/v1/completions", { prompt: "hi" }),
    ]);
    expect(responses.map((r) => r.status)).toEqual([200, 200, 200, 404, 405, 400, 400, 200]);
    for (const r of responses) expect(r.headers.get("x-sim-worker-id")).toBe("sg1");
    await Promise.all(responses.map((r) => r.arrayBuffer()));
  });
});

describe("POST /v1/chat/completions", () => {
  it("answers a chat.completion object with usage", async () => {
    const res = await post(w.url, "/v1/chat/completions", {
      model: "m",
      messages: [{ role: "user", content: "Hello" }],
      max_tokens: 5,
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("application/json");
    const body = await json(res);
    expect(body).toMatchObject({
      object: "chat.completion",
      model: "m",
      choices: [
        {
          index: 0,
          message: { role: "assistant", content: generatedText(5) },
          finish_reason: "length",
        },
      ],
      usage: {
        prompt_tokens: tokenize(renderChat([{ role: "user", content: "Hello" }])).length,
        completion_tokens: 5,
        prompt_tokens_details: { cached_tokens: 0 },
      },
    });
    expect(body.id).toMatch(/^chatcmpl-/);
    expect(typeof body.created).toBe("number");
    expect(body.usage.total_tokens).toBe(body.usage.prompt_tokens + 5);
  });

  it("streams chat.completion.chunk deltas, one per token, then [DONE]", async () => {
    const res = await post(w.url, "/v1/chat/completions", {
      messages: [{ role: "user", content: "Stream please" }],
      max_completion_tokens: 4,
      stream: true,
    });
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    const events = sseData(await res.text()) as Payload[];
    expect(events.at(-1)).toBe("[DONE]");
    const chunks = events.slice(0, -1);
    expect(chunks).toHaveLength(5); // role chunk + 4 tokens
    expect(chunks[0]?.choices[0].delta).toEqual({ role: "assistant", content: "" });
    for (const c of chunks) expect(c.object).toBe("chat.completion.chunk");
    expect(
      chunks
        .slice(1)
        .map((c) => c.choices[0].delta.content)
        .join(""),
    ).toBe(generatedText(4));
    expect(chunks.slice(1, -1).every((c) => c.choices[0].finish_reason === null)).toBe(true);
    expect(chunks.at(-1)?.choices[0].finish_reason).toBe("length");
    expect("usage" in (chunks[0] as object)).toBe(false);
  });

  it("honours stream_options.include_usage with a final usage chunk", async () => {
    const res = await post(w.url, "/v1/chat/completions", {
      messages: [{ role: "user", content: "usage?" }],
      max_tokens: 2,
      stream: true,
      stream_options: { include_usage: true },
    });
    const events = sseData(await res.text()) as Payload[];
    const usage = events.at(-2);
    expect(usage?.choices).toEqual([]);
    expect(usage?.usage).toMatchObject({
      completion_tokens: 2,
      prompt_tokens_details: { cached_tokens: 0 },
    });
    expect(events[0]?.usage).toBeNull();
  });

  it("renders multi-part content from its text parts", async () => {
    const res = await post(w.url, "/v1/chat/completions", {
      messages: [
        {
          role: "user",
          content: [
            { type: "text", text: "part one" },
            { type: "image_url", image_url: { url: "http://x" } },
            { type: "text", text: "part two" },
          ],
        },
      ],
      max_tokens: 1,
    });
    const body = await json(res);
    // The image's placeholders come first, as vLLM puts them for a string-content template.
    const content = `${imageText("http://x", true)}part one\npart two`;
    const expected = tokenize(renderChat([{ role: "user", content }])).length;
    expect(body.usage.prompt_tokens).toBe(expected);
  });

  it("keys its cache on images: a different image misses from it on, the same one matches through", async () => {
    const chat = (url: string) => ({
      messages: [
        { role: "system", content: LONG_SYSTEM },
        {
          role: "user",
          content: [
            { type: "image_url", image_url: { url } },
            { type: "text", text: "What is in this picture? ".repeat(8) },
          ],
        },
      ],
      max_tokens: 1,
    });
    const a = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAAB";
    const b = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAIAAAAC";
    const m = await startSimWorker({ timeScale: 0, flavor: "vllm" });
    const first = await json(post(m.url, "/v1/chat/completions", chat(a)));
    const other = await json(post(m.url, "/v1/chat/completions", chat(b)));
    const same = await json(post(m.url, "/v1/chat/completions", chat(a)));
    const prompt = first.usage.prompt_tokens as number;
    const beforeImage = tokenize(renderChat([{ role: "system", content: LONG_SYSTEM }], false));
    const shared = Math.floor((beforeImage.length + 1) / 16) * 16;
    expect(other.usage.prompt_tokens_details.cached_tokens).toBeLessThanOrEqual(shared + 16);
    expect(other.usage.prompt_tokens_details.cached_tokens).toBeGreaterThan(0);
    expect(same.usage.prompt_tokens_details.cached_tokens).toBe(Math.floor((prompt - 1) / 16) * 16);
    // /tokenize answers placeholders the same for every image, and as many as the prompt holds.
    const tokenized = await Promise.all(
      [a, b].map((url) => json(post(m.url, "/tokenize", { messages: chat(url).messages }))),
    );
    await m.close();
    expect(tokenized[0].tokens).toEqual(tokenized[1].tokens);
    expect(tokenized[0].tokens).toHaveLength(prompt);
  });

  it("reports cached_tokens for a repeated prompt, at block granularity", async () => {
    const request = {
      messages: [
        { role: "system", content: LONG_SYSTEM },
        { role: "user", content: "What is a prefix cache?" },
      ],
      max_tokens: 3,
    };
    const first = await json(post(w.url, "/v1/chat/completions", request));
    const second = await json(post(w.url, "/v1/chat/completions", request));
    const promptTokens = first.usage.prompt_tokens as number;
    expect(first.usage.prompt_tokens_details.cached_tokens).toBe(0);
    expect(second.usage.prompt_tokens_details.cached_tokens).toBe(
      Math.floor((promptTokens - 1) / 16) * 16,
    );
  });

  it("serves a multi-turn conversation from cache: the earlier turn and its reply hit", async () => {
    const [t0, t1] = multiTurnChat({
      conversations: 1,
      turns: 2,
      systemPromptTokens: 200,
      turnTokens: 20,
      outputTokens: 30,
      seed: 77,
    });
    const r0 = await json(post(w.url, "/v1/chat/completions", openAiBody(t0!)));
    const r1 = await json(post(w.url, "/v1/chat/completions", openAiBody(t1!)));
    expect(r0.choices[0].message.content).toBe(t1!.messages![2]!.content);
    const history = tokenize(promptTextOf(t0!)).length + 30;
    expect(r1.usage.prompt_tokens_details.cached_tokens).toBe(Math.floor(history / 16) * 16);
  });

  it("answers n choices", async () => {
    const body = await json(
      post(w.url, "/v1/chat/completions", {
        messages: [{ role: "user", content: "x" }],
        n: 3,
        max_tokens: 2,
      }),
    );
    expect(body.choices.map((c: { index: number }) => c.index)).toEqual([0, 1, 2]);
    expect(body.usage.completion_tokens).toBe(6);
  });
});

describe("POST /v1/completions", () => {
  it("answers a text_completion object", async () => {
    const body = await json(
      post(w.url, "/v1/completions", { prompt: "Once upon a time", max_tokens: 3 }),
    );
    expect(body).toMatchObject({
      object: "text_completion",
      choices: [{ index: 0, text: generatedText(3), finish_reason: "length" }],
      usage: { prompt_tokens: 4, completion_tokens: 3, total_tokens: 7 },
    });
    expect(body.id).toMatch(/^cmpl-/);
  });

  it("defaults the output length to 16 tokens", async () => {
    const body = await json(post(w.url, "/v1/completions", { prompt: "default" }));
    expect(body.usage.completion_tokens).toBe(16);
  });

  it("streams text chunks, one per token", async () => {
    const res = await post(w.url, "/v1/completions", {
      prompt: "abc",
      max_tokens: 3,
      stream: true,
    });
    const events = sseData(await res.text()) as Payload[];
    expect(events.at(-1)).toBe("[DONE]");
    const chunks = events.slice(0, -1);
    expect(chunks.map((c) => c.choices[0].text).join("")).toBe(generatedText(3));
    expect(chunks.map((c) => c.choices[0].finish_reason)).toEqual([null, null, "length"]);
    expect(chunks.every((c) => c.object === "text_completion")).toBe(true);
  });

  it("accepts token ids and lists of prompts", async () => {
    const ids = await json(
      post(w.url, "/v1/completions", { prompt: [1, 2, 3, 4, 5], max_tokens: 1 }),
    );
    expect(ids.usage.prompt_tokens).toBe(5);
    const batch = await json(
      post(w.url, "/v1/completions", { prompt: ["aaaa", "bbbbbbbb"], max_tokens: 2 }),
    );
    expect(batch.choices.map((c: { index: number }) => c.index)).toEqual([0, 1]);
    expect(batch.usage).toMatchObject({ prompt_tokens: 3, completion_tokens: 4 });
  });
});

describe("POST /generate (SGLang native)", () => {
  it("answers {text, meta_info} with token counts and cached tokens", async () => {
    const req = { text: LONG_SYSTEM, sampling_params: { max_new_tokens: 4 }, rid: "my-rid" };
    await post(w.url, "/generate", req).then((r) => r.arrayBuffer());
    const body = await json(post(w.url, "/generate", req));
    const promptTokens = tokenize(LONG_SYSTEM).length;
    expect(body).toMatchObject({
      text: generatedText(4),
      meta_info: {
        id: "my-rid",
        prompt_tokens: promptTokens,
        completion_tokens: 4,
        cached_tokens: Math.floor((promptTokens - 1) / 16) * 16,
        finish_reason: { type: "length", length: 4 },
      },
    });
    expect(body.output_ids).toHaveLength(4);
  });

  it("streams cumulative text and ends with [DONE]", async () => {
    const res = await post(w.url, "/generate", {
      input_ids: [5, 6, 7],
      sampling_params: { max_new_tokens: 3 },
      stream: true,
    });
    const events = sseData(await res.text()) as Payload[];
    expect(events.at(-1)).toBe("[DONE]");
    const chunks = events.slice(0, -1);
    expect(chunks.map((c) => c.text)).toEqual([
      generatedText(1),
      generatedText(2),
      generatedText(3),
    ]);
    expect(chunks.at(-1)?.meta_info.finish_reason).toEqual({ type: "length", length: 3 });
    expect(chunks[0]?.meta_info.finish_reason).toBeNull();
  });

  it("answers a list for a batch of texts, and accepts max_new_tokens 0 (prefill only)", async () => {
    const body = await json(
      post(w.url, "/generate", { text: ["one", "two"], sampling_params: { max_new_tokens: 0 } }),
    );
    expect(Array.isArray(body)).toBe(true);
    expect(body.map((o: { text: string }) => o.text)).toEqual(["", ""]);
    expect(body[0].meta_info.completion_tokens).toBe(0);
  });
});

describe("POST /v1/embeddings", () => {
  it("answers deterministic unit vectors per input, as floats or base64", async () => {
    const body = await json(post(w.url, "/v1/embeddings", { input: ["alpha", "beta", "alpha"] }));
    expect(body.object).toBe("list");
    expect(body.data).toHaveLength(3);
    const [a, b, a2] = body.data.map((d: { embedding: number[] }) => d.embedding);
    expect(a).toHaveLength(32);
    expect(a).toEqual(a2);
    expect(a).not.toEqual(b);
    expect(Math.hypot(...a)).toBeCloseTo(1, 5);
    expect(body.usage.prompt_tokens).toBe(5); // "alpha" 2 + "beta" 1 + "alpha" 2
    const b64 = await json(
      post(w.url, "/v1/embeddings", { input: "alpha", encoding_format: "base64" }),
    );
    const decoded = new Float32Array(
      Uint8Array.from(Buffer.from(b64.data[0].embedding, "base64")).buffer,
    );
    expect(Array.from(decoded)).toEqual(a);
  });
});

describe("GET endpoints", () => {
  it("/health answers 200 with an empty body", async () => {
    const res = await fetch(`${w.url}/health`);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe("");
  });

  it("/v1/models lists the served model", async () => {
    const body = await json(fetch(`${v.url}/v1/models`));
    expect(body).toMatchObject({
      object: "list",
      data: [{ id: "test-model", object: "model", owned_by: "vllm" }],
    });
  });

  it("/get_model_info and /get_server_info describe the model and limits", async () => {
    const info = await json(fetch(`${w.url}/get_model_info`));
    expect(info).toMatchObject({
      model_path: "meta-llama/Llama-3.1-8B-Instruct",
      is_generation: true,
    });
    const server = await json(fetch(`${w.url}/get_server_info`));
    expect(server).toMatchObject({
      max_running_requests: 256,
      page_size: 16,
      max_total_num_tokens: 400_000,
      // SGLang's priority server args, at its defaults.
      enable_priority_scheduling: false,
      disable_priority_preemption: false,
      schedule_low_priority_values_first: false,
      priority_scheduling_preemption_threshold: 10,
    });
  });

  it("/metrics speaks SGLang's names on an sglang worker", async () => {
    const res = await fetch(`${w.url}/metrics`);
    expect(res.headers.get("content-type")).toContain("text/plain");
    const text = await res.text();
    for (const name of [
      "sglang:num_running_reqs",
      "sglang:num_queue_reqs",
      "sglang:cache_hit_rate",
    ]) {
      expect(text).toMatch(new RegExp(`^${name}\\{model_name="[^"]+"\\} \\d`, "m"));
    }
    expect(text).not.toContain("vllm:");
    const hitRate = Number(/^sglang:cache_hit_rate\{[^}]*\} (\S+)$/m.exec(text)?.[1]);
    expect(hitRate).toBeGreaterThan(0); // earlier tests repeated prompts
  });

  it("/metrics speaks vLLM's names on a vllm worker, with prefix cache counters in tokens", async () => {
    const req = { prompt: LONG_SYSTEM, max_tokens: 1 };
    await post(v.url, "/v1/completions", req).then((r) => r.arrayBuffer());
    await post(v.url, "/v1/completions", req).then((r) => r.arrayBuffer());
    const text = await (await fetch(`${v.url}/metrics`)).text();
    const value = (name: string) =>
      Number(
        new RegExp(`^${name}\\{model_name="test-model",engine="0"\\} (\\S+)$`, "m").exec(text)?.[1],
      );
    expect(value("vllm:num_requests_running")).toBe(0);
    expect(value("vllm:num_requests_waiting")).toBe(0);
    expect(value("vllm:kv_cache_usage_perc")).toBe(0);
    const promptTokens = tokenize(LONG_SYSTEM).length;
    expect(value("vllm:prefix_cache_queries_total")).toBe(2 * promptTokens);
    expect(value("vllm:prefix_cache_hits_total")).toBe(Math.floor((promptTokens - 1) / 16) * 16);
    expect(text).not.toContain("sglang:");
  });

  it("a vllm worker exposes its KV capacity as vLLM does (cache_config_info), and no SGLang endpoints", async () => {
    const text = await (await fetch(`${v.url}/metrics`)).text();
    const info = /^vllm:cache_config_info\{([^}]*)\} 1\.0$/m.exec(text)?.[1] ?? "";
    expect(info).toContain('block_size="16"');
    expect(info).toContain(`num_gpu_blocks="${400_000 / 16}"`);
    expect((await fetch(`${v.url}/get_server_info`)).status).toBe(404);
    expect((await fetch(`${v.url}/get_model_info`)).status).toBe(404);
  });

  it("an sglang worker reports its KV pool as a gauge too (sglang:max_total_num_tokens)", async () => {
    const text = await (await fetch(`${w.url}/metrics`)).text();
    expect(text).toMatch(/^sglang:max_total_num_tokens\{model_name="[^"]+"\} 400000\.0$/m);
  });

  it("counts requests per endpoint", () => {
    const s = w.stats();
    expect(s.endpoints["/v1/chat/completions"]).toBeGreaterThan(0);
    expect(s.endpoints["/health"]).toBeGreaterThan(0);
    expect(s.endpoints.unmatched).toBeGreaterThan(0);
    expect(s.requests).toBeGreaterThan(0);
    expect(s.promptTokens).toBeGreaterThan(s.cachedTokens);
  });
});

describe("bad input", () => {
  const cases: Array<[string, string, unknown, number]> = [
    ["empty messages", "/v1/chat/completions", { messages: [] }, 400],
    ["message without role", "/v1/chat/completions", { messages: [{ content: "x" }] }, 400],
    [
      "max_tokens 0",
      "/v1/chat/completions",
      { messages: [{ role: "user", content: "x" }], max_tokens: 0 },
      400,
    ],
    [
      "stream_options without stream",
      "/v1/completions",
      { prompt: "x", stream_options: { include_usage: true } },
      400,
    ],
    ["no prompt", "/v1/completions", {}, 400],
    ["empty prompt", "/v1/completions", { prompt: "" }, 400],
    ["token id out of vocabulary", "/v1/completions", { prompt: [1, -2] }, 400],
    ["both text and input_ids", "/generate", { text: "a", input_ids: [1] }, 400],
    ["non-object body", "/v1/embeddings", [1, 2], 400],
    ["longer than max_model_len", "/v1/completions", { prompt: "x", max_tokens: 200_000 }, 400],
  ];
  for (const [name, path, body, status] of cases) {
    it(`answers ${status} with an OpenAI error object: ${name}`, async () => {
      const res = await post(w.url, path, body);
      expect(res.status).toBe(status);
      const payload = await json(res);
      expect(payload.error).toMatchObject({ type: "BadRequestError", code: 400 });
      expect(typeof payload.error.message).toBe("string");
    });
  }

  it("answers 413 for a body over the limit", async () => {
    const small = await startSimWorker({ timeScale: 0, bodyLimitBytes: 1000 });
    try {
      const res = await post(small.url, "/v1/completions", { prompt: "x".repeat(5000) });
      expect(res.status).toBe(413);
      expect((await json(res)).error.code).toBe(413);
      expect(res.headers.get("x-sim-worker-id")).toBe(small.id);
    } finally {
      await small.close();
    }
  });

  it("answers 400 for a request that could never fit in the KV cache", async () => {
    const tiny = await startSimWorker({ timeScale: 0, kvCapacityTokens: 64 });
    try {
      const res = await post(tiny.url, "/v1/completions", {
        prompt: "x".repeat(400),
        max_tokens: 1,
      });
      expect(res.status).toBe(400);
      expect((await json(res)).error.message).toContain("KV cache capacity");
    } finally {
      await tiny.close();
    }
  });
});
