import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { type SimWorker, type SimWorkerOptions, startSimWorker } from "../../sim/worker.js";
import type { ConfigOverrides } from "../../src/config.js";
import type { createLogger } from "../../src/logger.js";
import type { RunningRouter } from "../../src/server.js";
import { EngineIntrospector } from "../../src/workers/introspection.js";
import { WorkerRegistry } from "../../src/workers/registry.js";
import { FALLBACK_TREE_BUDGET } from "../../src/workers/tree-budget.js";
import { captureLogs } from "../helpers/log-capture.js";
import { postJson, startTestRouter, waitFor } from "../helpers/router.js";

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!();
});

async function sim(options: SimWorkerOptions): Promise<SimWorker> {
  const w = await startSimWorker({ timeScale: 0, ...options });
  cleanups.push(() => w.close());
  return w;
}

async function router(
  overrides: ConfigOverrides,
  logger?: ReturnType<typeof createLogger>,
): Promise<RunningRouter> {
  const r = await startTestRouter(overrides, logger);
  cleanups.push(() => r.stop(0));
  return r;
}

/** A worker that speaks HTTP but whose engine endpoints misbehave as `answer` says. */
async function oddWorker(
  answer: (path: string) => { status: number; body: string } | "hang",
): Promise<string> {
  const server: Server = createServer((req, res) => {
    const a = answer((req.url ?? "/").split("?")[0]!);
    if (a === "hang") return;
    res.writeHead(a.status, { "content-type": "text/plain" });
    res.end(a.body);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  cleanups.push(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** A registry of its own for one test, closed after it. */
function registryForTest(): WorkerRegistry {
  const registry = new WorkerRegistry({
    breaker: { failureThreshold: 5, openMs: 1000, successThreshold: 1 },
    connectTimeoutMs: 1000,
  });
  cleanups.push(() => registry.close());
  return registry;
}

function capture() {
  const { logger, entries } = captureLogs();
  return { lines: entries, logger };
}

const about = (lines: Array<Record<string, unknown>>, msg: string, endpoint?: string) =>
  lines.filter((l) => l.msg === msg && (endpoint === undefined || l.endpoint === endpoint));

describe("engine introspection over HTTP", () => {
  it("learns capacity, load and models of an SGLang and a vLLM worker, and sizes their trees", async () => {
    const sg = await sim({ id: "sg", flavor: "sglang", model: "sg-model", kvCapacityTokens: 4096 });
    const vl = await sim({ id: "vl", flavor: "vllm", model: "vl-model", kvCapacityTokens: 2048 });
    const r = await router({ workerUrls: [sg.url, vl.url], enginePollIntervalSecs: 60 });
    const sgw = r.context.registry.get(sg.url)!;
    const vlw = r.context.registry.get(vl.url)!;
    // Read at start-up, long before the 60 s interval.
    await waitFor(
      () => sgw.treeBudget !== FALLBACK_TREE_BUDGET && vlw.treeBudget !== FALLBACK_TREE_BUDGET,
      5000,
      "learned budgets",
    );
    expect(sgw.signals.engine).toBe("sglang");
    expect(sgw.signals.capacity()).toBe(4096);
    expect(sgw.signals.capacityFrom).toBe("get_server_info");
    expect(vlw.signals.engine).toBe("vllm");
    expect(vlw.signals.capacity()).toBe(2048);
    expect(vlw.signals.capacityFrom).toBe("metrics");
    expect(sgw.signals.load()).toMatchObject({ queued: 0, running: 0, kvUsage: 0 });
    expect(vlw.signals.load()).toMatchObject({ queued: 0, running: 0, kvUsage: 0 });
    expect(sgw.servedModels).toEqual(new Set(["sg-model"]));
    expect(vlw.servedModels).toEqual(new Set(["vl-model"]));
    expect(sgw.treeBudget).toBe(4096 * 4);
    expect(vlw.treeBudget).toBe(2048 * 4);
  });

  it("GET /workers and /metrics show capacity, chars per token, budget, queue, KV usage, signal age", async () => {
    const vl = await sim({ id: "obs", flavor: "vllm", model: "obs-model", kvCapacityTokens: 2048 });
    const bare = await oddWorker(() => ({ status: 404, body: "" }));
    const r = await router({ workerUrls: [vl.url, bare], enginePollIntervalSecs: 60 });
    const worker = r.context.registry.get(vl.url)!;
    await waitFor(() => worker.treeBudget === 8192, 5000, "learned budget");

    const { workers } = (await (await fetch(`${r.url}/workers`)).json()) as {
      workers: Array<Record<string, unknown>>;
    };
    const shown = workers.find((w) => w.url === vl.url)!;
    expect(shown).toMatchObject({
      engine: "vllm",
      kv_capacity_tokens: 2048,
      kv_capacity_source: "metrics",
      chars_per_token: 4,
      tree_budget_characters: 8192,
      engine_queue: 0,
      engine_running: 0,
      kv_usage: 0,
      feedback_corrections: 0,
      served_models: ["obs-model"],
    });
    expect(shown.signal_age_secs).toEqual(expect.any(Number));
    // A worker that exposes nothing: today's budget, nothing claimed.
    expect(workers.find((w) => w.url === bare)).toMatchObject({
      engine: null,
      kv_capacity_tokens: null,
      tree_budget_characters: FALLBACK_TREE_BUDGET,
      engine_queue: null,
      kv_usage: null,
      signal_age_secs: null,
      served_models: null,
    });

    const text = await (await fetch(`${r.url}/metrics`)).text();
    const series = (name: string) =>
      new RegExp(`^${name}\\{worker="${worker.id}"\\} (\\S+)$`, "m").exec(text)?.[1];
    expect(series("radixgate_worker_kv_capacity_tokens")).toBe("2048");
    expect(series("radixgate_worker_chars_per_token")).toBe("4");
    expect(series("radixgate_tree_budget_characters")).toBe("8192");
    expect(series("radixgate_worker_engine_queue")).toBe("0");
    expect(series("radixgate_worker_engine_running")).toBe("0");
    expect(series("radixgate_worker_kv_usage_ratio")).toBe("0");
    expect(Number(series("radixgate_worker_signal_age_seconds"))).toBeGreaterThanOrEqual(0);
    expect(text).toContain("# TYPE radixgate_feedback_corrections_total counter");
    const bareId = r.context.registry.get(bare)!.id;
    expect(text).not.toContain(`radixgate_worker_kv_capacity_tokens{worker="${bareId}"}`);
    expect(text).toContain(
      `radixgate_tree_budget_characters{worker="${bareId}"} ${FALLBACK_TREE_BUDGET}`,
    );
  });

  it("reads a worker right after it is added through the admin API", async () => {
    const w = await sim({ id: "late", kvCapacityTokens: 1024 });
    const r = await router({ enginePollIntervalSecs: 60 });
    const res = await postJson(`${r.url}/workers`, { url: w.url });
    expect(res.status).toBe(202);
    const worker = r.context.registry.get(w.url)!;
    await waitFor(() => worker.treeBudget === 4096, 5000, "learned budget");
  });

  it("ignores signals once they are older than 3 intervals; the budget keeps the last capacity", async () => {
    const w = await sim({ id: "gone", kvCapacityTokens: 1024 });
    const r = await router({ workerUrls: [w.url], enginePollIntervalSecs: 0.1 });
    const worker = r.context.registry.get(w.url)!;
    await waitFor(() => worker.signals.load() !== undefined, 5000, "first read");
    await w.close();
    await waitFor(() => worker.signals.load() === undefined, 5000, "stale load");
    expect(worker.signals.capacity()).toBeUndefined();
    expect(worker.treeBudget).toBe(4096);
  });

  it("garbage /metrics and a silent /get_server_info: one clear log line each, and today's behaviour", async () => {
    const url = await oddWorker((path) => {
      if (path === "/metrics") return { status: 200, body: "<html>metrics live elsewhere</html>" };
      if (path === "/get_server_info") return "hang";
      if (path === "/v1/completions")
        return { status: 200, body: JSON.stringify({ object: "text_completion", choices: [] }) };
      return { status: 404, body: "not found" };
    });
    const { lines, logger } = capture();
    const r = await router(
      { workerUrls: [url], enginePollIntervalSecs: 0.1, enginePollTimeoutSecs: 1 },
      logger,
    );
    const unreadable = "engine signal unreadable; the router goes on without it";
    await waitFor(
      () => about(lines, unreadable, "/get_server_info").length > 0,
      5000,
      "timeout log line",
    );
    const worker = r.context.registry.get(url)!;
    // Several polls later, still one line per endpoint.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(about(lines, "engine endpoint not exposed", "/v1/models")).toHaveLength(1);
    const garbage = about(lines, unreadable, "/metrics").filter((l) =>
      /not Prometheus text format/.test(String(l.reason)),
    );
    expect(garbage).toHaveLength(1);
    expect(about(lines, unreadable, "/get_server_info")).toHaveLength(1);
    expect(about(lines, unreadable, "/get_server_info")[0]?.reason).toBe(
      "no answer within 1000 ms",
    );
    expect(worker.signals.capacity()).toBeUndefined();
    expect(worker.signals.load()).toBeUndefined();
    expect(worker.servedModels).toBeUndefined();
    expect(worker.treeBudget).toBe(FALLBACK_TREE_BUDGET);
    const res = await postJson(`${r.url}/v1/completions`, {
      prompt: "still routed",
      max_tokens: 1,
    });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
  });

  it("a capacity of 0 is refused with a log line and the tree keeps 2^26", async () => {
    const url = await oddWorker((path) =>
      path === "/get_server_info"
        ? { status: 200, body: JSON.stringify({ model_path: "m", max_total_num_tokens: 0 }) }
        : { status: 404, body: "" },
    );
    const { lines, logger } = capture();
    const r = await router({ workerUrls: [url], enginePollIntervalSecs: 60 }, logger);
    const unreadable = "engine signal unreadable; the router goes on without it";
    await waitFor(() => about(lines, unreadable).length > 0, 5000, "log line");
    expect(about(lines, unreadable)[0]).toMatchObject({
      endpoint: "/get_server_info",
      reason: "reports a KV capacity of 0 tokens; ignored",
    });
    expect(r.context.registry.get(url)!.treeBudget).toBe(FALLBACK_TREE_BUDGET);
  });

  it("reads a worker behind --api-key with the worker's key", async () => {
    const w = await sim({ id: "keyed", kvCapacityTokens: 1024, apiKey: "sk-engine" });
    const r = await router({
      workerUrls: [w.url],
      workerApiKey: "sk-engine",
      enginePollIntervalSecs: 60,
    });
    const worker = r.context.registry.get(w.url)!;
    await waitFor(() => worker.treeBudget === 4096, 5000, "learned budget");
    expect(w.stats().unauthorized).toBe(0);
  });

  it("a body larger than the limit is refused with a log line, not read to the end", async () => {
    const url = await oddWorker((path) =>
      path === "/metrics"
        ? { status: 200, body: `sglang:num_queue_reqs 1\n${"# padding\n".repeat(1000)}` }
        : { status: 404, body: "" },
    );
    const { lines, logger } = capture();
    const registry = registryForTest();
    const introspector = new EngineIntrospector(
      registry,
      { intervalMs: 60_000, timeoutMs: 2000, maxBodyBytes: 1024 },
      logger,
    );
    const worker = registry.add(url); // read at once (the registry tells the introspector)
    await waitFor(() => lines.some((l) => l.endpoint === "/metrics"), 5000, "log line");
    expect(about(lines, "engine signal unreadable; the router goes on without it")).toMatchObject([
      { endpoint: "/metrics", reason: "body larger than 1024 bytes" },
    ]);
    expect(worker.signals.load()).toBeUndefined();
    introspector.stop();
  });

  it("remembers how many of this router's requests were pending when the engine reported its queue", async () => {
    const url = await oddWorker((path) =>
      path === "/metrics"
        ? { status: 200, body: "sglang:num_queue_reqs 3\nsglang:num_running_reqs 1\n" }
        : { status: 404, body: "" },
    );
    const registry = registryForTest();
    const introspector = new EngineIntrospector(
      registry,
      { intervalMs: 60_000, timeoutMs: 2000 },
      captureLogs("silent").logger,
    );
    const worker = registry.add(url); // read at once: two of the router's requests are waiting
    const waiting = [1, 2].map(() => worker.dispatch({ textChars: 10, uncachedChars: 10 }));
    expect(worker.pendingPrefillRequests).toBe(2);
    await waitFor(() => worker.signals.load() !== undefined, 5000, "first read");
    expect(worker.signals.load()).toMatchObject({ queued: 3, routerPending: 2 });
    // They started since: the third waiting request is still the only one someone else sent.
    for (const lease of waiting) lease.firstByte();
    expect(worker.pendingPrefillRequests).toBe(0);
    expect(worker.foreignQueuedAt(Date.now())).toBe(1);
    introspector.stop();
  });

  it("a fixed --max-tree-size is kept whatever the engine says", async () => {
    const w = await sim({ id: "fixed", kvCapacityTokens: 1024 });
    const r = await router({ workerUrls: [w.url], enginePollIntervalSecs: 60, maxTreeSize: 777 });
    const worker = r.context.registry.get(w.url)!;
    await waitFor(() => worker.signals.capacity() !== undefined, 5000, "first read");
    expect(worker.treeBudget).toBe(777);
  });
});
