import { describe, expect, it } from "vitest";
import { LoraSlots } from "../../sim/lora-slots.js";
import { parseExposition } from "../../src/engines/prometheus-text.js";
import { readVllmMetrics } from "../../src/engines/vllm-metrics.js";

describe("simulated LoRA slots", () => {
  it("keeps at most maxLoras loaded, least recently used out first; a loaded adapter costs no load", async () => {
    const slots = new LoraSlots(2, 0);
    for (const name of ["a", "b", "a", "c", "a", "b"]) (await slots.acquire(name))();
    // a, b (2 loads); a hit; c evicts b (3); a hit; b evicts c (4).
    expect(slots.loads).toBe(4);
  });

  it("concurrent requests for one adapter share its load; one in flight is not evicted", async () => {
    const slots = new LoraSlots(1, 5);
    const [r1, r2] = await Promise.all([slots.acquire("a"), slots.acquire("a")]);
    expect(slots.loads).toBe(1);
    r1();
    r2();
  });

  it("shows vLLM's lora_requests_info gauge, as the router reads it", async () => {
    const slots = new LoraSlots(4, 0);
    const release = await slots.acquire("sql");
    const text = `vllm:num_requests_running 1\n${slots.metricsText()}`;
    expect(readVllmMetrics(parseExposition(text))?.lora).toEqual({
      active: ["sql"],
      maxLoras: 4,
    });
    release();
  });
});
