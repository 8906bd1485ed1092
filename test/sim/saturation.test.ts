/**
 * The simulator saturates as the engines do (issue 24 item 6): a bounded running batch
 * (--max-running-requests / max_num_seqs), a FIFO waiting queue reported on /metrics as
 * sglang:num_queue_reqs or vllm:num_requests_waiting, and a time to first token that grows with the
 * place in that queue. Real HTTP; TTFT is measured on the worker's own clock per request.
 */
import { afterEach, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import { queueGauge } from "../helpers/sim-gauges.js";

const MODEL = "meta-llama/Llama-3.1-8B-Instruct";
let worker: SimWorker | undefined;
afterEach(async () => {
  await worker?.close();
  worker = undefined;
});

/** Sends a streamed completion and resolves with ms from sending to the first token event. */
async function ttft(url: string, name: string): Promise<number> {
  const sent = performance.now();
  const res = await fetch(`${url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: MODEL, prompt: `prompt ${name}`, max_tokens: 40, stream: true }),
  });
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  const first = await reader.read();
  const at = performance.now() - sent;
  expect(first.done).toBe(false);
  while (!(await reader.read()).done) {}
  return at;
}

describe.each(["sglang", "vllm"] as const)("simulator saturation (%s)", (flavor) => {
  it("beyond its running batch, requests wait in a queue the metrics report, and TTFT grows with it", async () => {
    // A running batch of 2; each request decodes 40 tokens at >= 6 ms a step (~250 ms).
    worker = await startSimWorker({ id: `sat-${flavor}`, flavor, maxRunning: 2 });
    const url = worker.url;
    const timings = Array.from({ length: 8 }, (_, i) => ttft(url, `${i}`));
    const w = worker;
    await new Promise<void>((resolve) => {
      const check = () => {
        const { running, waiting, completed } = w.stats();
        if (running + waiting + completed === 8) resolve();
        else setTimeout(check, 2);
      };
      check();
    });
    expect(w.stats().running).toBeLessThanOrEqual(2);
    // The engines set their gauges at a step (vLLM every step; SGLang at each prefill batch), not
    // at each arrival: the queue shows once a step has run since the last request came.
    let queued = await queueGauge(url, flavor);
    for (const until = performance.now() + 2000; queued < 3 && performance.now() < until; ) {
      await new Promise((resolve) => setTimeout(resolve, 5));
      queued = await queueGauge(url, flavor);
    }
    expect(queued).toBeGreaterThanOrEqual(3);
    const ttfts = await Promise.all(timings);
    const sorted = [...ttfts].sort((a, b) => a - b);
    // The last pair waited for three earlier pairs to finish (~250 ms each): far longer than the first.
    expect(sorted[7]).toBeGreaterThan((sorted[0] as number) + 500);
    expect(await queueGauge(url, flavor)).toBe(0);
  });
});
