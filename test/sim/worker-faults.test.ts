import { afterEach, describe, expect, it } from "vitest";
import { type SimWorker, type SimWorkerOptions, startSimWorker } from "../../sim/worker.js";
import { json, post, readEvents, sseData, waitFor } from "./http-helpers.js";

const open: SimWorker[] = [];

async function worker(options: SimWorkerOptions = {}): Promise<SimWorker> {
  const w = await startSimWorker({ timeScale: 0, ...options });
  open.push(w);
  return w;
}

afterEach(async () => {
  await Promise.all(open.splice(0).map((w) => w.close()));
});

const chat = (maxTokens: number, stream = false) => ({
  messages: [{ role: "user", content: "Tell me a long story." }],
  max_tokens: maxTokens,
  stream,
});

describe("fault: status", () => {
  it("answers every inference request with the status and a JSON error, until cleared", async () => {
    const w = await worker({ faults: { status: 503 } });
    const res = await post(w.url, "/v1/chat/completions", chat(2));
    expect(res.status).toBe(503);
    expect(await json(res)).toMatchObject({
      error: { type: "ServiceUnavailableError", code: 503 },
    });
    expect(res.headers.get("x-sim-worker-id")).toBe(w.id);
    expect((await post(w.url, "/generate", { text: "x" })).status).toBe(503);
    expect((await fetch(`${w.url}/health`)).status).toBe(200); // health is its own knob
    w.setFaults({ status: null });
    expect((await post(w.url, "/v1/chat/completions", chat(2))).status).toBe(200);
    expect(w.stats()).toMatchObject({ requests: 3, failed: 2, completed: 1 });
  });
});

describe("fault: failFirst", () => {
  it("fails the first N inference requests with failStatus, then serves", async () => {
    const w = await worker({ faults: { failFirst: 2, failStatus: 429 } });
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) {
      const res = await post(w.url, "/v1/completions", { prompt: "x", max_tokens: 1 });
      statuses.push(res.status);
      await res.arrayBuffer();
    }
    expect(statuses).toEqual([429, 429, 200, 200]);
    expect(w.faults().failFirst).toBe(0);
    w.setFaults({ failFirst: 1 }); // setting it again restarts the count, default status 500 kept
    w.setFaults({ failStatus: 500 });
    expect((await post(w.url, "/v1/completions", { prompt: "x" })).status).toBe(500);
    expect((await post(w.url, "/v1/completions", { prompt: "x" })).status).toBe(200);
  });
});

describe("fault: hang", () => {
  it("never answers; a client abort counts as aborted and leaves nothing in flight", async () => {
    const w = await worker({ faults: { hang: true } });
    const controller = new AbortController();
    const pending = post(w.url, "/v1/chat/completions", chat(2), { signal: controller.signal });
    await waitFor(() => w.stats().hanging === 1);
    expect(w.stats().inFlight).toBe(1);
    controller.abort();
    await expect(pending).rejects.toThrow();
    await waitFor(() => w.stats().aborted === 1);
    expect(w.stats()).toMatchObject({ inFlight: 0, hanging: 0, completed: 0 });
  });

  it("close() destroys the hanging request's socket", async () => {
    const w = await startSimWorker({ timeScale: 0, faults: { hang: true } });
    const pending = post(w.url, "/generate", { text: "x" });
    await waitFor(() => w.stats().hanging === 1);
    await w.close();
    await expect(pending).rejects.toThrow();
  });
});

describe("fault: crashMidStream", () => {
  it("destroys the socket after K chunks of a stream", async () => {
    const w = await worker({ faults: { crashMidStream: 2 } });
    let received = "";
    const attempt = (async () => {
      const res = await post(w.url, "/v1/completions", {
        prompt: "x",
        max_tokens: 10,
        stream: true,
      });
      const reader = (res.body as ReadableStream<Uint8Array>).getReader();
      const decoder = new TextDecoder();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        received += decoder.decode(value, { stream: true });
      }
    })();
    await expect(attempt).rejects.toThrow();
    const events = sseData(received);
    expect(events.length).toBeLessThanOrEqual(2);
    expect(events).not.toContain("[DONE]");
    expect(w.stats()).toMatchObject({ crashed: 1, completed: 0, inFlight: 0 });
  });

  it("leaves non-streaming responses alone", async () => {
    const w = await worker({ faults: { crashMidStream: 0 } });
    const res = await post(w.url, "/v1/completions", { prompt: "x", max_tokens: 10 });
    expect(res.status).toBe(200);
    expect((await json(res)).usage.completion_tokens).toBe(10);
  });
});

describe("fault: unhealthy", () => {
  it("makes /health answer 503 while inference still works", async () => {
    const w = await worker();
    w.setFaults({ unhealthy: true });
    const res = await fetch(`${w.url}/health`);
    expect(res.status).toBe(503);
    expect(res.headers.get("x-sim-worker-id")).toBe(w.id);
    expect((await post(w.url, "/v1/completions", { prompt: "x" })).status).toBe(200);
  });
});

describe("fault knobs over HTTP", () => {
  it("POST /_sim/faults applies a partial update and GET returns the knobs", async () => {
    const w = await worker();
    const res = await post(w.url, "/_sim/faults", { slowdown: 4, unhealthy: true });
    expect(res.status).toBe(200);
    expect(await json(res)).toMatchObject({
      slowdown: 4,
      unhealthy: true,
      hang: false,
      status: null,
    });
    expect(w.faults()).toMatchObject({ slowdown: 4, unhealthy: true });
    const current = await json(fetch(`${w.url}/_sim/faults`));
    expect(current.slowdown).toBe(4);
    expect((await fetch(`${w.url}/health`)).status).toBe(503);
  });

  it("rejects unknown knobs and bad values with 400 and changes nothing", async () => {
    const w = await worker();
    for (const body of [{ nope: 1 }, { slowdown: -1 }, { status: 99 }, { hang: "yes" }, [1]]) {
      const res = await post(w.url, "/_sim/faults", body);
      expect(res.status).toBe(400);
      await res.arrayBuffer();
    }
    expect(w.faults()).toMatchObject({ slowdown: 1, status: null, hang: false });
    expect(() => w.setFaults({ failFirst: -1 })).toThrow(RangeError);
  });

  it("GET /_sim/stats returns the same counters as stats()", async () => {
    const w = await worker();
    await post(w.url, "/v1/completions", { prompt: "x", max_tokens: 2 }).then((r) =>
      r.arrayBuffer(),
    );
    const stats = await json(fetch(`${w.url}/_sim/stats`));
    expect(stats).toMatchObject({ id: w.id, requests: 1, completed: 1, completionTokens: 2 });
  });
});

describe("client disconnects", () => {
  it("aborting a stream stops the simulated request, counts it and frees its batch slot", async () => {
    // Real time, one batch slot: the first request would hold it for ~60 s.
    const w = await worker({ timeScale: 1, maxRunning: 1 });
    const controller = new AbortController();
    const long = await post(w.url, "/v1/chat/completions", chat(10_000, true), {
      signal: controller.signal,
    });
    const { events } = await readEvents(long, 2);
    expect(events.length).toBeGreaterThanOrEqual(2);
    const queued = post(w.url, "/v1/completions", { prompt: "short", max_tokens: 2 });
    await waitFor(() => w.stats().waiting === 1);
    expect(w.stats()).toMatchObject({ running: 1, inFlight: 2 });

    controller.abort();
    const res = await queued;
    expect(res.status).toBe(200);
    expect((await json(res)).usage.completion_tokens).toBe(2);
    await waitFor(() => w.stats().aborted === 1);
    expect(w.stats()).toMatchObject({
      inFlight: 0,
      running: 0,
      waiting: 0,
      completed: 1,
      kvUsage: 0,
    });
  });

  it("aborting a non-streaming request also stops it", async () => {
    const w = await worker({ timeScale: 1 });
    const controller = new AbortController();
    const pending = post(
      w.url,
      "/generate",
      { text: "x", sampling_params: { max_new_tokens: 10_000 } },
      { signal: controller.signal },
    );
    await waitFor(() => w.stats().running === 1);
    controller.abort();
    await expect(pending).rejects.toThrow();
    await waitFor(() => w.stats().aborted === 1);
    expect(w.stats()).toMatchObject({ inFlight: 0, completed: 0 });
  });

  it("feeds the slowdown knob into every engine delay (0 removes them)", async () => {
    // 50 000 tokens at ~6 ms each would take minutes in real time; slowdown 0 makes it instant.
    // (The engine tests check that the delay factor multiplies each step exactly.)
    const w = await worker({ timeScale: 1, faults: { slowdown: 0 } });
    const res = await post(w.url, "/v1/completions", { prompt: "y", max_tokens: 50_000 });
    expect(res.status).toBe(200);
    expect((await json(res)).usage.completion_tokens).toBe(50_000);
  });
});
