import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import type { RunningRouter } from "../../src/server.js";
import { startTestRouter } from "../helpers/router.js";

/** The official client, as operators' users will drive the router. */
describe("openai npm client through the router", () => {
  let sims: SimWorker[];
  let router: RunningRouter;
  let client: OpenAI;

  beforeAll(async () => {
    sims = await Promise.all([
      startSimWorker({ id: "o1", timeScale: 0 }),
      startSimWorker({ id: "o2", timeScale: 0 }),
    ]);
    router = await startTestRouter({ workerUrls: sims.map((s) => s.url), apiKey: "router-key" });
    client = new OpenAI({ baseURL: `${router.url}/v1`, apiKey: "router-key", maxRetries: 0 });
  });
  afterAll(async () => {
    await router.stop(100);
    await Promise.all(sims.map((s) => s.close()));
  });

  it("chat completion", async () => {
    const completion = await client.chat.completions.create({
      model: "default",
      messages: [{ role: "user", content: "Say hi" }],
      max_tokens: 4,
    });
    expect(completion.object).toBe("chat.completion");
    expect(typeof completion.choices[0]?.message.content).toBe("string");
  });

  it("chat completion, streaming", async () => {
    const stream = await client.chat.completions.create({
      model: "default",
      messages: [{ role: "user", content: "Stream hi" }],
      max_tokens: 4,
      stream: true,
    });
    let text = "";
    let chunks = 0;
    for await (const chunk of stream) {
      chunks += 1;
      text += chunk.choices[0]?.delta?.content ?? "";
    }
    expect(chunks).toBeGreaterThan(1);
    expect(text.length).toBeGreaterThan(0);
  });

  it("completion", async () => {
    const completion = await client.completions.create({
      model: "default",
      prompt: "Once",
      max_tokens: 4,
    });
    expect(completion.object).toBe("text_completion");
    expect(typeof completion.choices[0]?.text).toBe("string");
  });

  it("completion, streaming", async () => {
    const stream = await client.completions.create({
      model: "default",
      prompt: "Once",
      max_tokens: 4,
      stream: true,
    });
    let text = "";
    for await (const chunk of stream) text += chunk.choices[0]?.text ?? "";
    expect(text.length).toBeGreaterThan(0);
  });

  it("a wrong key is refused with the OpenAI error shape", async () => {
    const bad = new OpenAI({ baseURL: `${router.url}/v1`, apiKey: "wrong", maxRetries: 0 });
    await expect(bad.completions.create({ model: "default", prompt: "x" })).rejects.toMatchObject({
      status: 401,
    });
  });
});
