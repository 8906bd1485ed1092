/**
 * Issue 10 item 10: workers behind their own key (SGLang/vLLM --api-key). The router sends
 * `Authorization: Bearer <key>` to them; the key never appears in GET /workers, /metrics or logs.
 */
import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { planFromArgs } from "../../sim/cli.js";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import { configFromArgv as nestedFromArgv } from "../../src/cli-options.js";
import { type ConfigOverrides, configWith, flagValues } from "../../src/config.js";
import { type RunningRouter, startRouter } from "../../src/server.js";
import { captureLogs } from "../helpers/log-capture.js";
import { postJson, waitFor } from "../helpers/router.js";

/** The parsed configuration by setting name, in the flags' units. */
const configFromArgv = (argv: string[]) => flagValues(nestedFromArgv(argv));

const KEY = "sk-worker-7f3a9c";

/** A router whose every log line is kept as text. */
async function loggedRouter(
  overrides: ConfigOverrides,
): Promise<{ router: RunningRouter; logs: string[] }> {
  const { logger, lines: logs } = captureLogs();
  const router = await startRouter(
    configWith({
      host: "127.0.0.1",
      port: 0,
      logLevel: "debug",
      healthCheckIntervalSecs: 0,
      evictionIntervalSecs: 0,
      ...overrides,
    }),
    { logger },
  );
  return { router, logs };
}

function chat(url: string, headers: Record<string, string> = {}): Promise<Response> {
  return postJson(
    `${url}/v1/chat/completions`,
    { model: "m", messages: [{ role: "user", content: "hi" }], max_tokens: 2 },
    headers,
  );
}

describe("workers behind their own API key", () => {
  const cleanup: Array<() => Promise<unknown>> = [];
  afterEach(async () => {
    await Promise.all(cleanup.splice(0).map((f) => f()));
  });

  async function sim(apiKey = KEY): Promise<SimWorker> {
    // Serves "m", the model chat() asks for (the router learns the list from /v1/models).
    const worker = await startSimWorker({ timeScale: 0, apiKey, model: "m" });
    cleanup.push(() => worker.close());
    return worker;
  }

  it("the simulator with apiKey answers 401 without the key, like the engines, and /health stays open", async () => {
    const worker = await sim();
    expect((await chat(worker.url)).status).toBe(401);
    expect((await chat(worker.url, { authorization: `Bearer ${KEY}` })).status).toBe(200);
    expect((await fetch(`${worker.url}/health`)).status).toBe(200);
    expect(worker.stats().unauthorized).toBe(1);
  });

  it("--worker-api-key: requests reach a keyed worker; without it the worker's 401 comes back", async () => {
    const worker = await sim();
    const { router } = await loggedRouter({ workerUrls: [worker.url], workerApiKey: KEY });
    cleanup.push(() => router.stop(100));
    const res = await chat(router.url);
    expect(res.status).toBe(200);
    await res.arrayBuffer();

    const bare = await loggedRouter({ workerUrls: [worker.url] });
    cleanup.push(() => bare.router.stop(100));
    expect((await chat(bare.router.url)).status).toBe(401);
  });

  it("issue 19: --api-key alone is also the --worker-urls workers' key, as in SGLang's gateway", async () => {
    // Router and engines launched with one --api-key: before, every request came back with the
    // worker's own 401.
    const worker = await sim();
    const { router } = await loggedRouter({ workerUrls: [worker.url], apiKey: KEY });
    cleanup.push(() => router.stop(100));
    expect((await chat(router.url)).status).toBe(401); // the router's own gate
    const res = await chat(router.url, { authorization: `Bearer ${KEY}` });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    expect(worker.stats().unauthorized).toBe(0);
  });

  it("issue 19: an explicit --worker-api-key wins over --api-key for the workers", async () => {
    const worker = await sim();
    const { router } = await loggedRouter({
      workerUrls: [worker.url],
      apiKey: "sk-client-side",
      workerApiKey: KEY,
    });
    cleanup.push(() => router.stop(100));
    const res = await chat(router.url, { authorization: "Bearer sk-client-side" });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
  });

  it("--worker-api-key stays this replica's default for the --worker-urls workers, not a key of their own shared with peers", async () => {
    const worker = await sim();
    const { router } = await loggedRouter({ workerUrls: [worker.url], workerApiKey: KEY });
    cleanup.push(() => router.stop(100));
    const { registry } = router.context;
    const added = registry.list()[0];
    expect(added?.apiKey).toBe(KEY);
    // Only a worker's own key travels (sealed) to the other replicas (state/replicated-membership.ts);
    // each replica calls the rest with its own --worker-api-key.
    expect(added === undefined ? "none" : registry.ownApiKey(added)).toBeUndefined();
  });

  it("issue 19: a worker answering 401 to introspection gets one warning naming --worker-api-key", async () => {
    const worker = await sim();
    const { router, logs } = await loggedRouter({
      workerUrls: [worker.url],
      enginePollIntervalSecs: 3600,
    });
    cleanup.push(() => router.stop(100));
    const unauthorized = () => logs.filter((l) => l.includes('"level":40') && l.includes("401"));
    // The read made when the worker was added, then two more rounds: still one warning.
    await waitFor(() => unauthorized().length > 0, 3000, "the 401 warning");
    await router.context.introspection.pollAll();
    await router.context.introspection.pollAll();
    const warnings = unauthorized();
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain("--worker-api-key");
    expect(logs.join("")).not.toContain(KEY);
  });

  it("the worker key replaces whatever Authorization the client sent", async () => {
    const worker = await sim();
    const { router } = await loggedRouter({ workerUrls: [worker.url], workerApiKey: KEY });
    cleanup.push(() => router.stop(100));
    const res = await chat(router.url, { authorization: "Bearer client-key" });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
  });

  it("POST /workers with api_key: that worker gets its own key, another keeps --worker-api-key", async () => {
    const own = await sim("sk-own-key-1");
    const shared = await sim();
    const { router, logs } = await loggedRouter({
      workerUrls: [shared.url],
      workerApiKey: KEY,
      policy: "round_robin",
    });
    cleanup.push(() => router.stop(100));
    const added = await postJson(`${router.url}/workers`, {
      url: own.url,
      api_key: "sk-own-key-1",
    });
    expect(added.status).toBe(202);
    const record = await added.text();
    expect(record).not.toContain("sk-own-key-1");
    expect(JSON.parse(record)).toMatchObject({ api_key: true });

    for (let i = 0; i < 4; i++) {
      const res = await chat(router.url);
      expect(res.status).toBe(200);
      await res.arrayBuffer();
    }
    expect(own.stats().completed).toBe(2);
    expect(shared.stats().completed).toBe(2);

    // Never shown or logged.
    const listing = await (await fetch(`${router.url}/workers`)).text();
    const metrics = await (await fetch(`${router.url}/metrics`)).text();
    for (const text of [listing, metrics, logs.join("")]) {
      expect(text).not.toContain("sk-own-key-1");
      expect(text).not.toContain(KEY);
    }
  });

  it("SGLang-style POST /add_worker?url= takes the key from an optional JSON body", async () => {
    const worker = await sim();
    const { router } = await loggedRouter({});
    cleanup.push(() => router.stop(100));
    const added = await fetch(`${router.url}/add_worker?url=${encodeURIComponent(worker.url)}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ api_key: KEY }),
    });
    expect(added.status).toBe(200);
    expect(await added.text()).not.toContain(KEY);
    expect((await chat(router.url)).status).toBe(200);
  });

  it("health checks carry the worker key too", async () => {
    const seen: IncomingHttpHeaders[] = [];
    const server = createServer((req, res) => {
      seen.push(req.headers);
      res.writeHead(req.headers.authorization === `Bearer ${KEY}` ? 200 : 401).end();
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    cleanup.push(
      () =>
        new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections();
        }),
    );
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const { router } = await loggedRouter({ workerUrls: [url], workerApiKey: KEY });
    cleanup.push(() => router.stop(100));
    // The check at start-up, and one more.
    await waitFor(() => seen.length > 0, 3000, "the start-up health check");
    await router.context.health.checkAll();
    expect(seen.every((h) => h.authorization === `Bearer ${KEY}`)).toBe(true);
    expect(router.context.registry.list()[0]!.healthy).toBe(true);
  });

  it("the key is not an enumerable property of the worker, so no serializer can reach it", async () => {
    const { router } = await loggedRouter({ workerApiKey: KEY });
    cleanup.push(() => router.stop(100));
    const worker = router.context.registry.add("http://127.0.0.1:9");
    expect(worker.apiKey).toBe(KEY);
    expect(Object.keys(worker)).not.toContain("apiKey");
    expect(JSON.stringify(worker)).not.toContain(KEY);
  });

  it("--worker-api-key and RADIXGATE_WORKER_API_KEY reach the config; the simulator takes --api-key", () => {
    expect(configFromArgv(["--worker-api-key", KEY]).workerApiKey).toBe(KEY);
    expect(configFromArgv([]).workerApiKey).toBeUndefined();
    expect(planFromArgs(["--api-key", KEY]).workers[0]?.apiKey).toBe(KEY);
  });
});
