/**
 * Data-parallel engines, load per rank (issue 20 item 8: "a worker's capacity and load are per
 * rank"): the router reads each rank's queue, running batch, KV usage and capacity from the
 * engine's /metrics series (vLLM's `engine` label), shows them per rank in GET /workers, and
 * breaks a tie between ranks by the rank's engine-reported queue + this router's in-flight, not by
 * its own in-flight count alone. A simulated vLLM engine with two ranks over real sockets.
 */
import { afterEach, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import type { HybridIndex } from "../../src/index/hybrid-index.js";
import { rankIndexId } from "../../src/index/rank-id.js";
import type { RunningRouter } from "../../src/server.js";
import { addWorkersWithEvents } from "../helpers/kv-events.js";
import { postJson, startTestRouter, waitFor } from "../helpers/router.js";

const open: { close(): unknown }[] = [];
const aborts: AbortController[] = [];
let router: RunningRouter | undefined;
afterEach(async () => {
  for (const a of aborts.splice(0)) a.abort();
  await router?.stop(0);
  router = undefined;
  for (const x of open.splice(0)) await x.close();
});

/** ~1500 characters of lines unique to `name`. */
function prompt(name: string): string {
  return Array.from({ length: 30 }, (_, i) => `${name} line ${i}: lorem ipsum.\n`).join("");
}

/** A request that decodes for minutes (6 ms a step), left running until the test ends. */
function longRequest(url: string, text: string, headers: Record<string, string> = {}): void {
  const abort = new AbortController();
  aborts.push(abort);
  fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify({ prompt: text, max_tokens: 20_000 }),
    signal: abort.signal,
  }).then(
    (res) => res.body?.cancel().catch(() => {}),
    () => {},
  );
}

interface RankJson {
  rank: number;
  in_flight_here: number;
  engine_queue: number | null;
  engine_running: number | null;
  kv_usage: number | null;
  kv_capacity_tokens: number | null;
}

async function listedRanks(r: RunningRouter): Promise<RankJson[] | undefined> {
  const body = (await (await fetch(`${r.url}/workers`)).json()) as {
    workers: { ranks?: RankJson[] }[];
  };
  return body.workers[0]?.ranks;
}

async function vllmDp2(): Promise<SimWorker> {
  const worker = await startSimWorker({
    id: "dp-load",
    flavor: "vllm",
    timeScale: 1,
    maxRunning: 2,
    kvCapacityTokens: 131_072,
    dpSize: 2,
    kvEvents: { encoding: "map" },
  });
  open.push(worker);
  return worker;
}

describe("data-parallel engines: load and capacity per rank", () => {
  it("vLLM dp=2: a tie goes to the rank whose engine queue is shorter, though this router has a request on it", async () => {
    const worker = await vllmDp2();
    router = await startTestRouter({
      policy: "cache_aware",
      kvEvents: true,
      kvEventsEndpointTemplate: "",
      kvEventsDpSize: 2,
      tokenizeTimeoutMs: 5000,
      enginePollIntervalSecs: 0.1,
    });
    await addWorkersWithEvents(router, [worker]);
    const registered = router.context.registry.get(worker.url)!;

    // This router's one request on rank 0 (a tie on an idle engine goes to rank 0).
    longRequest(`${router.url}/v1/completions`, prompt("router's long request"));
    await waitFor(() => registered.rankInFlight[0] === 1, 10_000, "router's request on rank 0");
    expect(registered.rankInFlight[1] ?? 0).toBe(0);
    // Other clients fill rank 1: two running, three waiting in its queue.
    for (let i = 0; i < 5; i++) {
      longRequest(`${worker.url}/v1/completions`, prompt(`direct ${i}`), {
        "x-data-parallel-rank": "1",
      });
    }
    await waitFor(
      async () => (await listedRanks(router!))?.[1]?.engine_queue === 3,
      10_000,
      "rank 1's queue in GET /workers",
    );
    const ranks = (await listedRanks(router))!;
    expect(ranks.map((r) => r.rank)).toEqual([0, 1]);
    expect(ranks[0]).toMatchObject({ in_flight_here: 1, engine_queue: 0, engine_running: 1 });
    expect(ranks[1]).toMatchObject({ in_flight_here: 0, engine_queue: 3, engine_running: 2 });
    for (const rank of ranks) {
      expect(rank.kv_capacity_tokens).toBe(131_072);
      expect(rank.kv_usage).toBeGreaterThan(0);
    }
    // The worker's own figures stay the sums over its ranks.
    const shown = registered.toJSON();
    expect(shown.engine_queue).toBe(3);
    expect(shown.engine_running).toBe(3);
    expect(shown.kv_capacity_tokens).toBe(2 * 131_072);

    // A new prompt: neither rank holds it (a tie). Rank 0: 1 of this router's in flight, queue 0;
    // rank 1: none of this router's, queue 3. It goes to rank 0.
    // (Sent to rank 1 it would wait there for minutes: the rank is read as the engine takes it.)
    const served = worker.rankRequests();
    const total = (counts: number[]) => counts.reduce((a, b) => a + b, 0);
    const answer = postJson(`${router.url}/v1/completions`, {
      prompt: prompt("a new prompt"),
      max_tokens: 1,
    });
    await waitFor(() => total(worker.rankRequests()) > total(served), 10_000, "the request");
    expect(worker.rankRequests()).toEqual([served[0]! + 1, served[1]!]);
    const res = await answer;
    expect(res.status).toBe(200);
    await res.text();
    expect(res.headers.get("x-radixgate-route")).toMatch(/index=precise$/);
  });

  it("sizes each rank's precise index from that rank's KV capacity", async () => {
    const worker = await vllmDp2();
    router = await startTestRouter({
      policy: "cache_aware",
      kvEvents: true,
      kvEventsEndpointTemplate: "",
      kvEventsDpSize: 2,
      kvIndexMaxBlocks: 1_000_000,
      enginePollIntervalSecs: 60, // read once, right after the worker is added
    });
    await addWorkersWithEvents(router, [worker]);
    const id = router.context.registry.get(worker.url)!.id;
    const precise = (router.context.index as HybridIndex).precise;
    // 131,072 tokens a rank in blocks of the engine's size (the simulator's default, 16 tokens).
    const blocks = 131_072 / 16;
    await waitFor(
      () => [0, 1].every((rank) => precise.blockLimitOf(rankIndexId(id, rank)) === blocks),
      10_000,
      "each rank's block limit",
    );
  });
});
