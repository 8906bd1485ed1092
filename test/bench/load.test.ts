import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadAgent, runLoad, sendRequest } from "../../bench/lib/load.js";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";

let sim: SimWorker;
const agent = loadAgent(4);

beforeAll(async () => {
  sim = await startSimWorker({ id: "s1", timeScale: 0.01 });
});
afterAll(async () => {
  await agent.close();
  await sim.close();
});

const body = (extra: Record<string, unknown>) =>
  JSON.stringify({ messages: [{ role: "user", content: "hello there" }], max_tokens: 5, ...extra });

describe("bench load client", () => {
  it("measures a stream: first content chunk before the end, output tokens from usage", async () => {
    const out = await sendRequest(agent, {
      origin: sim.url,
      path: "/v1/chat/completions",
      body: body({ stream: true, stream_options: { include_usage: true } }),
      stream: true,
    });
    expect(out).toMatchObject({ ok: true, status: 200, outputTokens: 5, workerId: "s1" });
    expect(out.ttftMs).toBeGreaterThan(0);
    expect(out.ttftMs).toBeLessThanOrEqual(out.e2eMs);
  });

  it("counts content chunks when the stream carries no usage, for completions too", async () => {
    const out = await sendRequest(agent, {
      origin: sim.url,
      path: "/v1/completions",
      body: JSON.stringify({ prompt: "once upon a time", max_tokens: 4, stream: true }),
      stream: true,
    });
    expect(out).toMatchObject({ ok: true, outputTokens: 4 });
    expect(Number.isFinite(out.ttftMs)).toBe(true);
  });

  it("reads a non-streamed answer (no TTFT) and reports HTTP errors without throwing", async () => {
    const ok = await sendRequest(agent, {
      origin: sim.url,
      path: "/v1/chat/completions",
      body: body({}),
      stream: false,
    });
    expect(ok).toMatchObject({ ok: true, outputTokens: 5 });
    expect(Number.isNaN(ok.ttftMs)).toBe(true);

    const bad = await sendRequest(agent, {
      origin: sim.url,
      path: "/v1/chat/completions",
      body: "{not json",
      stream: false,
    });
    expect(bad.ok).toBe(false);
    expect(bad.status).toBe(400);
    expect(bad.error).toMatch(/^HTTP 400/);

    const refused = await sendRequest(agent, {
      origin: "http://127.0.0.1:1",
      path: "/v1/chat/completions",
      body: body({}),
      stream: false,
    });
    expect(refused.ok).toBe(false);
    expect(refused.error).toBeDefined();
  });

  it("runs a job only after the job it waits for has completed", async () => {
    const done: string[] = [];
    const job = (key: string, maxTokens: number, after?: string) => ({
      key,
      ...(after === undefined ? {} : { after }),
      request: {
        origin: sim.url,
        path: "/v1/chat/completions",
        body: body({ max_tokens: maxTokens }),
        stream: false,
      },
    });
    // Without the dependency the short jobs b and c would finish long before a.
    // a lasts a few hundred ms even at timeScale 0.01, so d (started with it) ends first on a loaded machine.
    const jobs = [job("a", 2000), job("b", 1, "a"), job("c", 1, "b"), job("d", 1)];
    const run = await runLoad(jobs, {
      dispatcher: agent,
      concurrency: 4,
      onDone: (_, j) => done.push(j.key),
    });
    expect(run.outcomes.map((o) => o.ok)).toEqual([true, true, true, true]);
    expect(done.indexOf("d")).toBeLessThan(done.indexOf("a"));
    expect(done.indexOf("a")).toBeLessThan(done.indexOf("b"));
    expect(done.indexOf("b")).toBeLessThan(done.indexOf("c"));
  });

  it("open loop: sends every job, spaced by the given gaps", async () => {
    const jobs = [0, 1, 2].map((i) => ({
      key: `k${i}`,
      request: { origin: sim.url, path: "/v1/chat/completions", body: body({}), stream: false },
    }));
    const run = await runLoad(jobs, { dispatcher: agent, concurrency: 1, gapsMs: [0, 20, 20] });
    expect(run.outcomes.every((o) => o.ok)).toBe(true);
    expect(run.wallMs).toBeGreaterThanOrEqual(39);
  });
});
