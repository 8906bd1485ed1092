/**
 * --kv-events end to end: simulated workers publish KV events over real ZMQ (both encodings),
 * answer /tokenize and serve replay; the router routes on what the engines report.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import type { HybridIndex } from "../../src/index/hybrid-index.js";
import { summarizeParsed } from "../../src/intake/body-summary.js";
import { routingText } from "../../src/intake/routing-text.js";
import type { RunningRouter } from "../../src/server.js";
import { addWorkersWithEvents } from "../helpers/kv-events.js";
import { postJson, startTestRouter, waitFor } from "../helpers/router.js";

let router: RunningRouter;
let sims: SimWorker[];

/** A prompt of many lines, unique per name, ~1500 characters (~370 tokens, 23 blocks of 16). */
function prompt(name: string): string {
  return Array.from(
    { length: 30 },
    (_, i) => `${name} line ${i}: lorem ipsum dolor sit amet.\n`,
  ).join("");
}

async function direct(sim: SimWorker, text: string): Promise<void> {
  const res = await postJson(`${sim.url}/v1/completions`, { prompt: text, max_tokens: 1 });
  expect(res.status).toBe(200);
  await res.text();
}

async function routed(text: string): Promise<{ worker: string; route: string }> {
  const res = await postJson(`${router.url}/v1/completions`, { prompt: text, max_tokens: 1 });
  expect(res.status).toBe(200);
  await res.text();
  return {
    worker: res.headers.get("x-sim-worker-id") ?? "",
    route: res.headers.get("x-radixgate-route") ?? "",
  };
}

function workerId(sim: SimWorker): string {
  return router.context.registry.get(sim.url)!.id;
}

/** Engine blocks the router's precise index holds for the worker. */
function blockCount(sim: SimWorker): number {
  return (router.context.index as HybridIndex).precise.blockCount(workerId(sim));
}

async function blocksArrive(sim: SimWorker, from: number, what: string) {
  await waitFor(() => blockCount(sim) > from, 10_000, what);
}

/** Characters of `text` the router's precise index holds for the worker (what routing reads). */
async function held(sim: SimWorker, text: string): Promise<number> {
  const index = router.context.index as HybridIndex;
  const worker = [{ id: workerId(sim) }];
  await index.prepare({ text, tokenizeInput: { prompt: text } }, worker);
  const out = [0];
  index.match(text, undefined, worker, out);
  return out[0]!;
}

/**
 * Waits until the router's precise index holds (nearly) all of `text` for the worker: its
 * BlockStored has been applied. A block count alone cannot tell, since a worker may already hold
 * other blocks and, with its cache full, evicts as many as it stores.
 */
async function holds(sim: SimWorker, text: string): Promise<void> {
  let chars = 0;
  await waitFor(
    async () => {
      chars = await held(sim, text);
      return chars >= 0.9 * text.length;
    },
    10_000,
    () => `the precise index to hold the prefix for ${sim.id} (${chars} of ${text.length})`,
  );
}

/** Sum of a counter's values whose labels match. */
async function counter(name: string, labels: Record<string, string>): Promise<number> {
  const metric = await router.context.metrics.registry.getSingleMetric(name)?.get();
  return (metric?.values ?? [])
    .filter((v) => Object.entries(labels).every(([k, x]) => v.labels[k] === x))
    .reduce((n, v) => n + v.value, 0);
}

beforeAll(async () => {
  sims = await Promise.all(
    (["array", "map", "map"] as const).map((encoding, i) =>
      startSimWorker({
        id: `kv-${i}`,
        timeScale: 0,
        kvCapacityTokens: 4096,
        kvEvents: { encoding, noReplay: false },
      }),
    ),
  );
  router = await startTestRouter({
    policy: "cache_aware",
    kvEvents: true,
    kvEventsEndpointTemplate: "",
    tokenizeTimeoutMs: 5000,
    kvEventsRebuildSecs: 0,
    kvSpeculativeTtlMs: 200,
  });
  await addWorkersWithEvents(router, sims);
});

afterAll(async () => {
  await router?.stop(0);
  await Promise.all(sims.map((s) => s.close()));
});

describe("--kv-events", () => {
  it("shows each worker's event stream in the admin API", async () => {
    const res = await fetch(`${router.url}/workers`);
    const body = (await res.json()) as {
      workers: { kv_events: { state: string; endpoint: string } }[];
    };
    expect(body.workers.map((w) => w.kv_events.state)).toEqual(["live", "live", "live"]);
    expect(body.workers[0]!.kv_events.endpoint).toMatch(/^tcp:\/\/127\.0\.0\.1:\d+$/);
  });

  it("a prefix sent straight to one worker attracts the next request with it (bypass traffic)", async () => {
    const text = prompt("bypass");
    const target = sims[1]!;
    const before = blockCount(target);
    await direct(target, text);
    await blocksArrive(target, before, "BlockStored from the bypassed worker");
    const { worker, route } = await routed(`${text}and a new question\n`);
    expect(worker).toBe(target.id);
    expect(route).toMatch(/^cache_hit;match=0\.9\d;index=precise$/);
  });

  it("regression: a request naming its model routes on the engine's blocks too (prepare and decide use one model key)", async () => {
    const text = prompt("named model");
    const target = sims[2]!;
    const before = blockCount(target);
    await direct(target, text);
    await blocksArrive(target, before, "BlockStored from the bypassed worker");
    const res = await postJson(`${router.url}/v1/completions`, {
      model: "meta-llama/Llama-3.1-8B-Instruct",
      prompt: `${text}and a named question\n`,
      max_tokens: 1,
    });
    expect(res.status).toBe(200);
    await res.text();
    expect(res.headers.get("x-sim-worker-id")).toBe(target.id);
    expect(res.headers.get("x-radixgate-route")).toMatch(/^cache_hit;match=0\.9\d;index=precise$/);
  });

  it("an eviction on the worker stops the preference; the worker that still holds it wins", async () => {
    const text = prompt("evicted");
    const [a, b] = [sims[0]!, sims[2]!];
    await direct(a, text);
    await blocksArrive(a, 0, "blocks on a");
    // Routed to a: its approximate tree now holds the prefix too.
    expect(await routed(`${text}q1\n`)).toEqual({
      worker: a.id,
      route: expect.stringMatching(/^cache_hit;.*index=precise$/),
    });
    await direct(b, text);
    await holds(b, text);
    // Flood a until its 4096-token cache has evicted the prefix.
    for (let i = 0; i < 30; i++) await direct(a, prompt(`flood ${i}`));
    expect(a.stats().kvEvictions).toBeGreaterThan(0);
    // Until a's BlockRemoved is applied both hold it, and a tie may go either way.
    await waitFor(
      async () => (await held(a, text)) < (await held(b, text)),
      10_000,
      "the eviction on a applied",
    );
    await waitFor(
      async () => (await routed(`${text}q2\n`)).worker === b.id,
      10_000,
      "routing to the worker that still holds the prefix",
    );
    for (let i = 0; i < 3; i++) expect((await routed(`${text}q3 ${i}\n`)).worker).toBe(b.id);
  });

  it("a chat with an image: the precise match stops before it, so another image claims nothing past it", async () => {
    const system = { role: "system", content: prompt("vision system") };
    const chat = (url: string) => ({
      messages: [
        system,
        {
          role: "user",
          content: [
            { type: "text", text: "Describe it.\n".repeat(20) },
            { type: "image_url", image_url: { url } },
          ],
        },
      ],
      max_tokens: 1,
    });
    const target = sims[2]!;
    const res = await postJson(`${target.url}/v1/chat/completions`, chat("https://img/a.png"));
    expect(res.status).toBe(200);
    await res.text();
    const index = router.context.index as HybridIndex;
    const worker = [{ id: workerId(target) }];
    const matched = async (url: string) => {
      const summary = summarizeParsed("chat", chat(url), 1 << 20, true);
      await index.prepare(summary, worker);
      const out = [0];
      index.match(summary.text, undefined, worker, out);
      return { chars: out[0]!, text: summary.text };
    };
    await waitFor(async () => (await matched("https://img/a.png")).chars > 0, 10_000, "match");
    const same = await matched("https://img/a.png");
    const other = await matched("https://img/b.png");
    // At most the system prompt's share of the text, the same for either image: never a claim on
    // the blocks the engine keyed by the image.
    const systemChars = routingText("chat", { messages: [system] }).length;
    expect(same.chars).toBeGreaterThan(0.8 * systemChars);
    expect(same.chars).toBeLessThanOrEqual(systemChars);
    expect(other.chars).toBe(same.chars);
  });

  it("AllBlocksCleared and a sequence reset (engine restart) drop the worker's blocks", async () => {
    const text = prompt("cleared");
    const target = sims[1]!;
    await direct(target, text);
    await waitFor(() => blockCount(target) > 0, 10_000, "blocks");
    target.clearKvCache();
    await waitFor(() => blockCount(target) === 0, 10_000, "AllBlocksCleared applied");

    await direct(target, text);
    await waitFor(() => blockCount(target) > 0, 10_000, "blocks again");
    const resetsBefore = await counter("radixgate_kv_events_resets_total", {
      reason: "sequence_reset",
    });
    target.clearKvCache({ restart: true });
    await direct(target, prompt("after restart"));
    await waitFor(
      async () =>
        (await counter("radixgate_kv_events_resets_total", { reason: "sequence_reset" })) >
        resetsBefore,
      10_000,
      "sequence reset detected",
    );
    // The restarted worker no longer holds the prefix; a worker that does gets the request.
    const other = sims[0]!;
    await direct(other, text);
    // Not a block count: the other worker holds blocks from the earlier tests already.
    await holds(other, text);
    expect((await routed(`${text}after\n`)).worker).toBe(other.id);
  });

  it("a dropped message is fetched again through replay", async () => {
    const text = prompt("replayed");
    const target = sims[2]!;
    const labels = { worker: workerId(target), outcome: "complete" };
    const before = await counter("radixgate_kv_events_replays_total", labels);
    target.kvEvents!.dropNext(1);
    await direct(target, text);
    // The gap shows when the next batch arrives.
    await direct(target, prompt("next batch"));
    await waitFor(
      async () => (await counter("radixgate_kv_events_replays_total", labels)) > before,
      10_000,
      "replay",
    );
    expect(await counter("radixgate_kv_events_resets_total", { worker: workerId(target) })).toBe(0);
    const { worker, route } = await routed(`${text}question\n`);
    expect(worker).toBe(target.id);
    expect(route).toMatch(/^cache_hit;.*index=precise$/);
  });
});
