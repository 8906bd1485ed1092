import type { SimFlavor } from "../../sim/worker.js";

/**
 * The queue gauge on a simulated engine's /metrics page. The engines set their gauges at a step
 * (vLLM every step, SGLang at each prefill batch and every few decode steps), not at each arrival,
 * so a test waits for this before it expects the router to read a queue.
 */
export async function queueGauge(url: string, flavor: SimFlavor): Promise<number> {
  const name = flavor === "vllm" ? "vllm:num_requests_waiting" : "sglang:num_queue_reqs";
  const text = await (await fetch(`${url}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${name}{`));
  return Number(line?.slice(line.lastIndexOf(" ") + 1));
}
