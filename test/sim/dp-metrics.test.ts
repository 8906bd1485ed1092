/**
 * A simulated data-parallel engine's GET /metrics, as the engines print it: one series per rank
 * (vLLM label `engine`, SGLang label `dp_rank`), every family once with its HELP and TYPE and all
 * ranks' series together (prometheus_client's output); read back by the router's parsers.
 */
import { afterEach, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import { parseExposition } from "../../src/engines/prometheus-text.js";
import { readSglangMetrics } from "../../src/engines/sglang-metrics.js";
import { readVllmMetrics } from "../../src/engines/vllm-metrics.js";

let worker: SimWorker | undefined;
afterEach(async () => {
  await worker?.close();
  worker = undefined;
});

async function metricsOf(flavor: "vllm" | "sglang"): Promise<string> {
  worker = await startSimWorker({ flavor, dpSize: 2, timeScale: 0, kvCapacityTokens: 4096 });
  return (await fetch(`${worker.url}/metrics`)).text();
}

/** The families in the order their samples come, one entry per run: each family must come once. */
function typeLines(text: string): string[] {
  const runs: string[] = [];
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const name = line.slice(0, line.search(/[{ ]/));
    if (runs.at(-1) !== name) runs.push(name);
  }
  return runs;
}

describe("simulator /metrics with data parallelism", () => {
  it("vLLM: each family once, one series per engine label", async () => {
    const text = await metricsOf("vllm");
    const names = typeLines(text);
    expect(new Set(names).size).toBe(names.length);
    const reading = readVllmMetrics(parseExposition(text));
    expect(reading?.dpSize).toBe(2);
    expect(reading?.capacityTokens).toBe(2 * 4096);
    expect(reading?.ranks?.map((r) => r.capacityTokens)).toEqual([4096, 4096]);
    expect(reading?.ranks?.map((r) => r.queued)).toEqual([0, 0]);
  });

  it("SGLang: each family once, one series per dp_rank label", async () => {
    const text = await metricsOf("sglang");
    const names = typeLines(text);
    expect(new Set(names).size).toBe(names.length);
    expect(text).toContain(
      'sglang:num_queue_reqs{model_name="meta-llama/Llama-3.1-8B-Instruct",dp_rank="1"} 0.0',
    );
    const reading = readSglangMetrics(parseExposition(text));
    expect(reading?.dpSize).toBe(2);
    expect(reading?.capacityTokens).toBe(2 * 4096);
    expect(reading?.ranks?.map((r) => r.capacityTokens)).toEqual([4096, 4096]);
  });
});
