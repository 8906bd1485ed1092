/**
 * --engine-priority over real sockets (issue 24 follow-up): the simulated engine receives the
 * request's priority in its own convention (vLLM lower first, SGLang higher first), only with the
 * flag, and a priority the client set itself is left alone.
 */
import { afterEach, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import type { RunningRouter } from "../../src/server.js";
import { postJson, startTestRouter, waitFor } from "../helpers/router.js";

const open: { close(): unknown }[] = [];
let router: RunningRouter | undefined;
afterEach(async () => {
  await router?.stop(0);
  router = undefined;
  for (const x of open.splice(0)) await x.close();
});

async function setUp(flavor: "vllm" | "sglang", enginePriority: boolean): Promise<SimWorker> {
  const worker = await startSimWorker({ id: `p-${flavor}`, flavor, timeScale: 0, model: "m" });
  open.push(worker);
  router = await startTestRouter({
    workerUrls: [worker.url],
    enginePriority,
    enginePollIntervalSecs: 60, // read once, right after the worker is added: its engine kind
  });
  const added = router.context.registry.get(worker.url)!;
  await waitFor(() => added.signals.engine === flavor, 5000, "engine kind read");
  return worker;
}

async function chat(body: Record<string, unknown> = {}, priority = "40"): Promise<void> {
  const res = await postJson(
    `${router!.url}/v1/chat/completions`,
    { model: "m", messages: [{ role: "user", content: "hi" }], max_tokens: 2, ...body },
    { "x-priority": priority },
  );
  expect(res.status).toBe(200);
  await res.text();
}

describe("--engine-priority", () => {
  it("vLLM: the engine receives the priority negated (lower first)", async () => {
    const worker = await setUp("vllm", true);
    await chat();
    expect(worker.stats().lastPriority).toBe(-40);
  });

  it("SGLang: the engine receives the priority as it is (higher first), on /generate too", async () => {
    const worker = await setUp("sglang", true);
    await chat();
    expect(worker.stats().lastPriority).toBe(40);
    const res = await postJson(
      `${router!.url}/generate`,
      { text: "hello", sampling_params: { max_new_tokens: 1 } },
      { "x-priority": "-3" },
    );
    expect(res.status).toBe(200);
    await res.text();
    expect(worker.stats().lastPriority).toBe(-3);
  });

  it("leaves a priority the client set alone", async () => {
    const worker = await setUp("vllm", true);
    await chat({ priority: 5 });
    expect(worker.stats().lastPriority).toBe(5);
  });

  it("without the flag, the engine receives no priority", async () => {
    const worker = await setUp("vllm", false);
    await chat();
    expect(worker.stats().lastPriority).toBeUndefined();
  });
});
