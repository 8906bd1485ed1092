/**
 * --dp-aware without --kv-events: the router reads an engine's data-parallel ranks from the
 * engine itself (SGLang's /get_server_info dp_size; vLLM's per-engine metrics), keeps a prefix
 * tree per rank, and sends each request to its worker's best rank: X-data-parallel-rank on the
 * OpenAI endpoints, data_parallel_rank in SGLang's /generate body (sim/dp-ranks.ts reads them as
 * the engines do). Simulated engines with two ranks, over real sockets.
 */
import { afterEach, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import type { RunningRouter } from "../../src/server.js";
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

function prompt(name: string): string {
  return Array.from({ length: 30 }, (_, i) => `${name} line ${i}: lorem ipsum.\n`).join("");
}

async function complete(path: string, body: Record<string, unknown>): Promise<void> {
  const res = await postJson(`${router!.url}${path}`, body);
  expect(res.status).toBe(200);
  await res.text();
}

describe.each(["sglang", "vllm"] as const)("--dp-aware, %s engine with dp=2", (flavor) => {
  it("learns the ranks from the engine and keeps each prefix on one rank; a new one goes to the idle rank", async () => {
    const worker: SimWorker = await startSimWorker({
      id: `dp-${flavor}`,
      flavor,
      timeScale: 1,
      dpSize: 2,
      model: "m",
    });
    open.push(worker);
    router = await startTestRouter({
      workerUrls: [worker.url],
      dpAware: true,
      policy: "cache_aware",
      enginePollIntervalSecs: 0.1,
    });
    const registered = router.context.registry.get(worker.url)!;
    await waitFor(() => registered.signals.dpSize === 2, 10_000, "dp_size read from the engine");

    // A long request on rank 0 (a tie on an idle engine goes to rank 0), kept running.
    const abort = new AbortController();
    aborts.push(abort);
    void fetch(`${router.url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ prompt: prompt("long"), max_tokens: 20_000, stream: true }),
      signal: abort.signal,
    }).then(
      // Read on (to the abort): a cancelled body is a disconnect, which ends the request.
      (res) => res.body?.pipeTo(new WritableStream()).catch(() => {}),
      () => {},
    );
    await waitFor(() => worker.rankRequests()[0] === 1, 10_000, "the long request on rank 0");
    expect(worker.rankRequests()).toEqual([1, 0]);
    expect(registered.rankInFlight[0]).toBe(1);

    // A new prefix: held nowhere, so the rank without this router's request.
    await complete("/v1/completions", { prompt: prompt("second"), max_tokens: 1 });
    expect(worker.rankRequests()).toEqual([1, 1]);
    // The long request ends: both ranks idle. Each prefix goes back to the rank that holds it.
    abort.abort();
    await waitFor(() => registered.rankInFlight[0] === 0, 10_000, "the long request ended");
    await complete("/v1/completions", { prompt: prompt("second"), max_tokens: 1 });
    expect(worker.rankRequests()).toEqual([1, 2]);
    await complete("/v1/completions", { prompt: prompt("long"), max_tokens: 1 });
    expect(worker.rankRequests()).toEqual([2, 2]);
    const shown = (await (await fetch(`${router.url}/workers`)).json()) as {
      workers: { ranks?: { rank: number }[] }[];
    };
    expect(shown.workers[0]!.ranks?.map((r) => r.rank)).toEqual([0, 1]);
  });
});

describe("--dp-aware off", () => {
  it("sends no rank: the engine's own balancer chooses", async () => {
    const worker = await startSimWorker({ id: "dp-off", timeScale: 0, dpSize: 2, model: "m" });
    open.push(worker);
    router = await startTestRouter({ workerUrls: [worker.url], enginePollIntervalSecs: 0.1 });
    const registered = router.context.registry.get(worker.url)!;
    await waitFor(() => registered.signals.dpSize === 2, 10_000, "dp_size read from the engine");
    await complete("/v1/completions", { prompt: prompt("x"), max_tokens: 1 });
    expect(registered.rankInFlight.length).toBe(0);
  });
});
