import { afterEach, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import type { ConfigOverrides } from "../../src/config.js";
import type { RunningRouter } from "../../src/server.js";
import { type CacheTotals, filler } from "../helpers/cache-account.js";
import { captureLogs } from "../helpers/log-capture.js";
import { postJson, startTestRouter, waitFor } from "../helpers/router.js";

type Totals = CacheTotals;

interface DebugCache extends Totals {
  window_minutes: number;
  since: string;
  workers: Record<string, Totals>;
  models: Record<string, Totals>;
  prefixes: {
    lost_to_routing: { hash: string; head: string; tokens: number; requests: number }[];
    lost_to_eviction: { hash: string; head: string; tokens: number; requests: number }[];
  };
}

const ADMIN = { authorization: "Bearer admin-key" };

async function account(router: RunningRouter): Promise<DebugCache> {
  const res = await fetch(`${router.url}/debug/cache`, { headers: ADMIN });
  expect(res.status).toBe(200);
  return (await res.json()) as DebugCache;
}

/** The account once `n` requests are in it (it is recorded as the answer ends). */
async function accountAfter(router: RunningRouter, n: number): Promise<DebugCache> {
  await waitFor(async () => (await account(router)).requests >= n, 5000, `${n} accounted`);
  return account(router);
}

async function complete(router: RunningRouter, prompt: string): Promise<Response> {
  const res = await postJson(`${router.url}/v1/completions`, { prompt, max_tokens: 1 });
  expect(res.status).toBe(200);
  await res.arrayBuffer();
  return res;
}

/** Every part of the account adds up to the prompt tokens. */
function expectBalanced(t: Totals): void {
  expect(
    t.reported_cached_tokens +
      t.index_loss_tokens +
      t.unreported_tokens +
      t.routing_loss_tokens.total +
      t.cold_tokens,
  ).toBe(t.prompt_tokens);
}

async function metric(router: RunningRouter, line: string): Promise<number> {
  const text = await (await fetch(`${router.url}/metrics`)).text();
  const found = text.split("\n").find((l) => l.startsWith(`${line} `));
  return found === undefined ? Number.NaN : Number(found.split(" ").pop());
}

describe("the cache account (issue 26), with simulated engines over real sockets", () => {
  const sims: SimWorker[] = [];
  let router: RunningRouter | undefined;
  const start = async (workers: number, overrides: ConfigOverrides = {}, logger = undefined) => {
    for (let i = 0; i < workers; i++) {
      sims.push(await startSimWorker({ id: `s${i + 1}`, timeScale: 0 }));
    }
    router = await startTestRouter(
      {
        policy: "cache_aware",
        workerUrls: sims.map((s) => s.url),
        adminApiKey: "admin-key",
        ...overrides,
      },
      logger,
    );
    return router;
  };
  afterEach(async () => {
    await router?.stop(100);
    router = undefined;
    await Promise.all(sims.splice(0).map((s) => s.close()));
  });

  it("counts a fresh prefix as cold", async () => {
    const r = await start(2);
    await complete(r, filler("cold", 2000));
    const a = await accountAfter(r, 1);
    expect(a.prompt_tokens).toBeGreaterThan(400);
    expect(a.available_tokens).toBe(0);
    expect(a.reported_cached_tokens).toBe(0);
    expect(a.cold_tokens).toBe(a.prompt_tokens);
    expect(a.routing_loss_tokens.total).toBe(0);
    expect(a.index_loss_tokens).toBe(0);
    expectBalanced(a);
    expect(await metric(r, "radixgate_cache_account_cold_tokens_total")).toBe(a.cold_tokens);
    expect(await metric(r, "radixgate_cache_account_prompt_tokens_total")).toBe(a.prompt_tokens);
  });

  it("counts a held prefix sent elsewhere by load as routing loss, with the runner-up in the explain header", async () => {
    // A cache threshold no match can pass: cache_aware always takes the least loaded, and equal
    // loads take turns, so the repeat goes to the worker that does not hold it.
    const r = await start(2, { cacheThreshold: 1, explainHeader: "x-cache-account" });
    const prompt = filler("held", 2000);
    const first = await complete(r, prompt);
    const second = await complete(r, prompt);
    const holder = first.headers.get("x-radixgate-worker");
    expect(second.headers.get("x-radixgate-worker")).not.toBe(holder);
    const other = r.context.registry.list().find((w) => w.id !== holder)!.id;
    expect(first.headers.get("x-cache-account")).toBe(`available=0;chosen=0;runner_up=${other}:0`);
    const header = second.headers.get("x-cache-account") ?? "";
    const m = /^available=(\d+);chosen=0;runner_up=([^:]+):(\d+);reason=load$/.exec(header);
    expect(m, header).not.toBeNull();
    expect(m![2]).toBe(holder);
    expect(Number(m![1])).toBeGreaterThan(400);
    expect(m![3]).toBe(m![1]);

    const a = await accountAfter(r, 2);
    expect(a.routing_loss_tokens.load).toBeGreaterThan(400);
    expect(a.routing_loss_tokens.load).toBe(a.available_tokens);
    expect(a.chosen_tokens).toBe(0);
    expect(a.index_loss_tokens).toBe(0);
    expectBalanced(a);
    expect(a.prefixes.lost_to_routing).toHaveLength(1);
    expect(a.prefixes.lost_to_routing[0]!.head).toBe(prompt.slice(0, 40));
    expect(a.prefixes.lost_to_routing[0]!.hash).toMatch(/^[0-9a-f]{8}$/);
    expect(
      await metric(r, 'radixgate_cache_account_routing_loss_tokens_total{reason="load"}'),
    ).toBe(a.routing_loss_tokens.load);
    // Per worker: the loss is the second worker's request's.
    expect(a.workers[second.headers.get("x-radixgate-worker")!]!.routing_loss_tokens.load).toBe(
      a.routing_loss_tokens.load,
    );
  });

  it("counts what an engine evicted behind the router's back as index loss", async () => {
    const r = await start(1);
    const prompt = filler("evict", 2000);
    await complete(r, prompt);
    await complete(r, prompt);
    const warm = await accountAfter(r, 2);
    expect(warm.reported_cached_tokens).toBeGreaterThan(400);
    expect(warm.index_loss_tokens).toBeLessThan(20);

    sims[0]!.clearKvCache({ restart: true });
    await complete(r, prompt);
    const a = await accountAfter(r, 3);
    const lost = a.index_loss_tokens - warm.index_loss_tokens;
    expect(lost).toBeGreaterThan(400);
    expect(a.routing_loss_tokens.total).toBe(0);
    expectBalanced(a);
    expect(a.prefixes.lost_to_eviction[0]!.head).toBe(prompt.slice(0, 40));
    expect(await metric(r, "radixgate_cache_account_index_loss_tokens_total")).toBe(
      a.index_loss_tokens,
    );
  });

  it("reads the cached tokens of streamed answers (OpenAI include_usage, SGLang meta_info)", async () => {
    const r = await start(1);
    const content = filler("stream", 2000);
    for (let i = 0; i < 2; i++) {
      const res = await postJson(`${r.url}/v1/chat/completions`, {
        messages: [{ role: "user", content }],
        max_tokens: 2,
        stream: true,
        stream_options: { include_usage: true },
      });
      expect(res.status).toBe(200);
      await res.text();
    }
    const chat = await accountAfter(r, 2);
    expect(chat.reported_cached_tokens).toBeGreaterThan(400);
    expect(chat.unreported_tokens).toBe(0);
    expectBalanced(chat);

    const text = filler("generate", 2000);
    for (let i = 0; i < 2; i++) {
      const res = await postJson(`${r.url}/generate`, {
        text,
        stream: true,
        sampling_params: { max_new_tokens: 2 },
      });
      expect(res.status).toBe(200);
      await res.text();
    }
    const generate = await accountAfter(r, 4);
    expect(generate.reported_cached_tokens - chat.reported_cached_tokens).toBeGreaterThan(400);
    expectBalanced(generate);
  });

  it("counts the index's claim as unreported when a stream carries no usage", async () => {
    const r = await start(1);
    const content = filler("nousage", 2000);
    for (let i = 0; i < 2; i++) {
      const res = await postJson(`${r.url}/v1/chat/completions`, {
        messages: [{ role: "user", content }],
        max_tokens: 2,
        stream: true,
      });
      await res.text();
    }
    const a = await accountAfter(r, 2);
    expect(a.reported_cached_tokens).toBe(0);
    expect(a.unreported_tokens).toBeGreaterThan(400);
    expectBalanced(a);
  });

  it("serves GET /debug/cache behind the admin key, per worker and per model", async () => {
    const r = await start(2);
    const res = await postJson(`${r.url}/v1/chat/completions`, {
      model: "m",
      messages: [{ role: "user", content: filler("shape", 1000) }],
      max_tokens: 1,
    });
    await res.arrayBuffer();
    expect((await fetch(`${r.url}/debug/cache`)).status).toBe(401);
    expect(
      (await fetch(`${r.url}/debug/cache`, { headers: { authorization: "Bearer wrong" } })).status,
    ).toBe(401);
    const a = await accountAfter(r, 1);
    expect(a.window_minutes).toBe(15);
    expect(Date.parse(a.since)).toBeLessThanOrEqual(Date.now());
    expect(Object.keys(a.workers)).toEqual([res.headers.get("x-radixgate-worker")]);
    expect(Object.keys(a.models)).toHaveLength(1);
    const [model] = Object.values(a.models);
    expect(model!.prompt_tokens).toBe(a.prompt_tokens);
    expect(a.prefixes).toEqual({
      key_chars: 1024,
      head_chars: 40,
      lost_to_routing: [],
      lost_to_eviction: [],
    });
  });

  it("writes each request's account at debug level, and sends no explain header by default", async () => {
    const logs = captureLogs("debug");
    const r = await start(1, { logLevel: "debug" }, logs.logger as never);
    const prompt = filler("debug", 2000);
    const first = await complete(r, prompt);
    expect([...first.headers.keys()].filter((h) => h.includes("account"))).toEqual([]);
    await complete(r, prompt);
    await accountAfter(r, 2);
    const lines = logs.entries.filter((e) => e.msg === "cache account");
    expect(lines).toHaveLength(2);
    expect(lines[1]).toMatchObject({
      worker: first.headers.get("x-radixgate-worker"),
      routing_loss_tokens: 0,
      index_loss_tokens: expect.any(Number),
    });
    expect(lines[1]!.reported_cached_tokens).toBeGreaterThan(400);
    expect(lines[1]!.chosen_tokens).toBe(lines[1]!.available_tokens);
  });

  it("keeps no account with --cache-account false (no counters, no header, an empty /debug/cache)", async () => {
    const r = await start(1, { cacheAccount: false, explainHeader: "x-cache-account" });
    const prompt = filler("off", 2000);
    const first = await complete(r, prompt);
    await complete(r, prompt);
    expect(first.headers.get("x-cache-account")).toBeNull();
    expect((await account(r)).requests).toBe(0);
    expect(await metric(r, "radixgate_cache_account_prompt_tokens_total")).toBe(0);
  });
});
