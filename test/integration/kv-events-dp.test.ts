/**
 * --kv-events with data-parallel engines (issue 20 item 8): a simulated engine with two ranks,
 * each with its own KV cache and publisher on the rank-0 ports + rank, over real ZMQ sockets. The
 * router follows every rank, indexes each apart, and sends a request to the rank holding its
 * prefix (vLLM: the X-data-parallel-rank header; SGLang /generate: the body's rank field).
 */
import { afterEach, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import type { HybridIndex } from "../../src/index/hybrid-index.js";
import { rankIndexId } from "../../src/index/rank-id.js";
import type { RunningRouter } from "../../src/server.js";
import { addWorkersWithEvents } from "../helpers/kv-events.js";
import { postJson, startTestRouter, waitFor } from "../helpers/router.js";

const open: { close(): unknown }[] = [];
let router: RunningRouter | undefined;
afterEach(async () => {
  await router?.stop(0);
  router = undefined;
  for (const x of open.splice(0)) await x.close();
});

/** ~1500 characters of lines unique to `name`. */
function prompt(name: string): string {
  return Array.from({ length: 30 }, (_, i) => `${name} line ${i}: lorem ipsum.\n`).join("");
}

async function sim(flavor: "vllm" | "sglang"): Promise<SimWorker> {
  const worker = await startSimWorker({
    id: `dp-${flavor}`,
    flavor,
    timeScale: 0,
    kvCapacityTokens: 8192,
    dpSize: 2,
    kvEvents: { encoding: flavor === "vllm" ? "map" : "array" },
  });
  open.push(worker);
  return worker;
}

/** Engine blocks the router's precise index holds for one rank of the worker. */
function rankBlocks(r: RunningRouter, worker: SimWorker, rank: number): number {
  const id = r.context.registry.get(worker.url)!.id;
  return (r.context.index as HybridIndex).precise.blockCount(rankIndexId(id, rank));
}

async function ok(res: Response): Promise<Response> {
  expect(res.status).toBe(200);
  await res.text();
  return res;
}

describe("--kv-events with data-parallel engines", () => {
  it("vLLM: follows every rank's stream and sends a request to the rank holding its prefix", async () => {
    const worker = await sim("vllm");
    router = await startTestRouter({
      policy: "cache_aware",
      kvEvents: true,
      kvEventsEndpointTemplate: "",
      kvEventsDpSize: 2,
      tokenizeTimeoutMs: 5000,
    });
    await addWorkersWithEvents(router, [worker]);
    const listed = (await (await fetch(`${router.url}/workers`)).json()) as {
      workers: { kv_events: { state: string; rank_states?: string[] } }[];
    };
    expect(listed.workers[0]!.kv_events.rank_states).toEqual(["live", "live"]);

    for (const rank of [1, 0]) {
      const text = prompt(`rank ${rank} prefix`);
      const before = rankBlocks(router, worker, rank);
      // Straight to one rank, bypassing the router.
      await ok(
        await postJson(
          `${worker.url}/v1/completions`,
          { prompt: text, max_tokens: 1 },
          { "x-data-parallel-rank": String(rank) },
        ),
      );
      await waitFor(() => rankBlocks(router!, worker, rank) > before, 10_000, "rank's blocks");
      const served = worker.rankRequests();
      const res = await ok(
        await postJson(`${router.url}/v1/completions`, {
          prompt: `${text}and a question\n`,
          max_tokens: 1,
        }),
      );
      expect(res.headers.get("x-radixgate-route")).toMatch(/index=precise$/);
      const after = worker.rankRequests();
      expect(after[rank]).toBe(served[rank]! + 1);
    }
    const shown = router.context.registry.get(worker.url)!.toJSON();
    expect(shown.in_flight_per_rank).toEqual([0, 0]);
  });

  it("SGLang: learns dp_size from /get_server_info and puts the rank in the /generate body", async () => {
    const worker = await sim("sglang");
    router = await startTestRouter({
      policy: "cache_aware",
      kvEvents: true,
      kvEventsEndpointTemplate: "",
      tokenizeTimeoutMs: 5000,
      enginePollIntervalSecs: 60, // read once, right after the worker is added
    });
    await addWorkersWithEvents(router, [worker]);
    const kv = router.context.kvEvents!;
    const id = router.context.registry.get(worker.url)!.id;
    await waitFor(() => kv.ranksOf(id) === 2 && kv.isLive(id), 10_000, "both ranks followed");

    const text = prompt("generate prefix");
    const before = rankBlocks(router, worker, 1);
    await ok(
      await postJson(`${worker.url}/generate`, {
        text,
        routed_dp_rank: 1,
        sampling_params: { max_new_tokens: 1 },
      }),
    );
    await waitFor(() => rankBlocks(router!, worker, 1) > before, 10_000, "rank 1's blocks");
    const served = worker.rankRequests();
    await ok(
      await postJson(`${router.url}/generate`, {
        text: `${text}and a question\n`,
        sampling_params: { max_new_tokens: 1 },
      }),
    );
    expect(worker.rankRequests()[1]).toBe(served[1]! + 1);
  });

  it("vLLM: learns the ranks from the engine label of its /metrics", async () => {
    const worker = await sim("vllm");
    router = await startTestRouter({
      policy: "cache_aware",
      kvEvents: true,
      kvEventsEndpointTemplate: "",
      enginePollIntervalSecs: 60, // read once, right after the worker is added
    });
    await addWorkersWithEvents(router, [worker]);
    const kv = router.context.kvEvents!;
    const id = router.context.registry.get(worker.url)!.id;
    await waitFor(() => kv.ranksOf(id) === 2 && kv.isLive(id), 10_000, "both ranks followed");
    expect(kv.rankStatesOf(id)).toEqual(["live", "live"]);
  });
});
