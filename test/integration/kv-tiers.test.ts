/**
 * Offloaded KV tiers end to end: simulated workers with a CPU tier publish tiered KV events over
 * ZMQ (GPU store, CPU write-through, GPU eviction); the router's precise index follows each block
 * between tiers and credits a CPU-held prefix at --kv-tier-weights' cpu weight.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import type { HybridIndex } from "../../src/index/hybrid-index.js";
import { CPU_TIER } from "../../src/index/kv-tiers.js";
import type { RunningRouter } from "../../src/server.js";
import { addWorkersWithEvents } from "../helpers/kv-events.js";
import { postJson, startTestRouter, waitFor } from "../helpers/router.js";

let router: RunningRouter;
let sims: SimWorker[];

/** ~1100 characters (~280 tokens), unique per name. */
function prompt(name: string): string {
  return Array.from({ length: 30 }, (_, i) => `${name} line ${i}: lorem ipsum dolor.\n`).join("");
}

async function direct(sim: SimWorker, text: string): Promise<number> {
  const res = await postJson(`${sim.url}/v1/completions`, { prompt: text, max_tokens: 1 });
  expect(res.status).toBe(200);
  const body = (await res.json()) as {
    usage?: { prompt_tokens_details?: { cached_tokens?: number } };
  };
  return body.usage?.prompt_tokens_details?.cached_tokens ?? 0;
}

const id = (sim: SimWorker) => router.context.registry.get(sim.url)!.id;
const index = () => router.context.index as HybridIndex;

/** Characters of `text` the router credits the worker with (what routing reads). */
async function credited(sim: SimWorker, text: string): Promise<number> {
  const worker = [{ id: id(sim) }];
  await index().prepare({ text, tokenizeInput: { prompt: text } }, worker);
  const out = [0];
  index().match(text, undefined, worker, out);
  return out[0]!;
}

beforeAll(async () => {
  sims = await Promise.all(
    [0, 1].map((i) =>
      startSimWorker({
        id: `tier-${i}`,
        timeScale: 0,
        // A GPU cache of ~4 prompts; a CPU tier of ~40.
        kvCapacityTokens: 1600,
        cpuTierTokens: 16_000,
        kvEvents: { encoding: "map" },
      }),
    ),
  );
  router = await startTestRouter({
    policy: "prefix_cost",
    kvEvents: true,
    kvEventsEndpointTemplate: "",
    tokenizeTimeoutMs: 5000,
    kvEventsRebuildSecs: 0,
    kvSpeculativeTtlMs: 50,
    kvTierWeights: "gpu=1,cpu=0.8,disk=0.3",
  });
  await addWorkersWithEvents(router, sims);
});

afterAll(async () => {
  await router?.stop(0);
  await Promise.all(sims.map((s) => s.close()));
});

describe("offloaded KV tiers (--kv-events with a CPU tier)", () => {
  it("a prefix evicted from one worker's GPU to its CPU tier is credited at the cpu weight and draws the request", async () => {
    const target = sims[0]!;
    const text = prompt("offloaded");
    await direct(target, text);
    await waitFor(
      async () => (await credited(target, text)) >= 0.9 * text.length,
      10_000,
      "the GPU blocks in the precise index",
    );
    // Other prompts push it out of the GPU cache; the CPU tier keeps it.
    for (let i = 0; i < 8; i++) await direct(target, prompt(`filler ${i}`));
    let chars = 0;
    await waitFor(
      async () => {
        chars = await credited(target, text);
        return chars < 0.85 * text.length && chars > 0.6 * text.length;
      },
      10_000,
      () => `the prefix credited at the CPU weight (${chars} of ${text.length})`,
    );
    expect(index().precise.tierBlockCount(id(target), CPU_TIER)).toBeGreaterThan(15);
    expect(await credited(sims[1]!, text)).toBe(0);
    // The router sends the next request with that prefix there; the engine loads it from the CPU.
    const res = await postJson(`${router.url}/v1/completions`, {
      prompt: `${text}and a question\n`,
      max_tokens: 1,
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as {
      usage: { prompt_tokens_details?: { cached_tokens?: number } };
    };
    expect(res.headers.get("x-sim-worker-id")).toBe(target.id);
    expect(body.usage.prompt_tokens_details?.cached_tokens ?? 0).toBeGreaterThan(200);
  });
});
