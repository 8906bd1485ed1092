/**
 * --tokenizer-path end to end: the router tokenizes prompts with the model's tokenizer.json, the
 * simulated workers prefill and publish KV events with the same file, and the precise index
 * matches their blocks without a single /tokenize call (real HTTP and ZMQ sockets).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TINY_BOS_ID, writeTinyTokenizer } from "../../sim/tiny-tokenizer.js";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import type { HybridIndex } from "../../src/index/hybrid-index.js";
import { loadLocalTokenizer } from "../../src/kv-events/local-tokenizer.js";
import type { RunningRouter } from "../../src/server.js";
import { addWorkersWithEvents } from "../helpers/kv-events.js";
import { postJson, startTestRouter, waitFor } from "../helpers/router.js";

let router: RunningRouter;
let sims: SimWorker[];
const tokenizerPath = writeTinyTokenizer();

/** ~30 lines of words the tiny vocabulary covers, unique per name (a few hundred tokens). */
function prompt(name: string): string {
  return Array.from({ length: 30 }, (_, i) => `${name} line ${i}: the other inn, later.\n`).join(
    "",
  );
}

const workerId = (sim: SimWorker) => router.context.registry.get(sim.url)!.id;
const blockCount = (sim: SimWorker) =>
  (router.context.index as HybridIndex).precise.blockCount(workerId(sim));
const tokenizeCalls = () => sims.reduce((n, s) => n + (s.stats().endpoints["/tokenize"] ?? 0), 0);

beforeAll(async () => {
  sims = await Promise.all(
    [0, 1, 2].map((i) =>
      startSimWorker({
        id: `tok-${i}`,
        timeScale: 0,
        kvCapacityTokens: 8192,
        kvEvents: { encoding: "map" },
        tokenizerPath,
      }),
    ),
  );
  router = await startTestRouter({
    kvEvents: true,
    kvEventsEndpointTemplate: "",
    tokenizerPath,
    kvSpeculativeTtlMs: 200,
  });
  await addWorkersWithEvents(router, sims);
});

afterAll(async () => {
  await router?.stop(0);
  await Promise.all(sims.map((s) => s.close()));
});

describe("--tokenizer-path", () => {
  it("matches the blocks of a prefix sent straight to one worker, tokenizing in the router", async () => {
    const text = prompt("local");
    const target = sims[1]!;
    const direct = await postJson(`${target.url}/v1/completions`, { prompt: text, max_tokens: 1 });
    expect(direct.status).toBe(200);
    await direct.text();
    await waitFor(() => blockCount(target) > 0, 10_000, "BlockStored from the bypassed worker");

    const res = await postJson(`${router.url}/v1/completions`, {
      prompt: `${text}and a new question\n`,
      max_tokens: 1,
    });
    expect(res.status).toBe(200);
    await res.text();
    expect(res.headers.get("x-sim-worker-id")).toBe(target.id);
    expect(res.headers.get("x-radixgate-route")).toMatch(/;index=precise$/);
    expect(
      Number(/match=([\d.]+)/.exec(res.headers.get("x-radixgate-route") ?? "")?.[1]),
    ).toBeGreaterThan(0.9);
    expect(tokenizeCalls()).toBe(0);
  });

  it("the simulator's /tokenize answers with the same tokenizer (BOS first for a prompt)", async () => {
    const res = await postJson(`${sims[0]!.url}/tokenize`, { prompt: "the other line" });
    const body = (await res.json()) as { tokens: number[] };
    expect(body.tokens).toEqual(loadLocalTokenizer(tokenizerPath).encode("the other line", true));
    expect(body.tokens[0]).toBe(TINY_BOS_ID);
  });
});

describe("--tokenizer-path at start-up", () => {
  it("a file that is not a tokenizer stops the router with an error naming the flag", async () => {
    await expect(
      startTestRouter({
        kvEvents: true,
        kvEventsEndpointTemplate: "",
        tokenizerPath: "/nonexistent/tokenizer.json",
      }),
    ).rejects.toThrow(/^--tokenizer-path cannot read/);
  });
});
