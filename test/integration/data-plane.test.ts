import { afterEach, describe, expect, it } from "vitest";
import { startSimWorker } from "../../sim/worker.js";
import { workerIdFor } from "../../src/workers/worker-url.js";
import { postJson, startTestRouter, waitFor } from "../helpers/router.js";
import { simsBehindRouter } from "../helpers/sim-behind-router.js";

const LONG_SYSTEM = "You are a meticulous assistant for the ACME support desk. ".repeat(40);

describe("data plane", () => {
  const fleet = simsBehindRouter(4, "w");

  afterEach(async () => {
    for (const w of fleet.workers)
      w.setFaults({ hang: false, status: null, failFirst: 0, slowdown: 1 });
  });

  const simFor = (res: Response) => {
    const id = res.headers.get("x-radixgate-worker");
    return fleet.workers.find((w) => workerIdFor(w.url) === id);
  };

  it.each([
    [
      "/v1/chat/completions",
      { model: "m", messages: [{ role: "user", content: "Hello there" }], max_tokens: 4 },
      "chat.completion",
    ],
    [
      "/v1/completions",
      { model: "m", prompt: "Once upon a time", max_tokens: 4 },
      "text_completion",
    ],
    ["/v1/embeddings", { model: "m", input: "embed me" }, "list"],
  ])("POST %s reaches a worker and comes back unchanged", async (path, body, object) => {
    const res = await postJson(`${fleet.router.url}${path}`, body);
    expect(res.status).toBe(200);
    const json = (await res.json()) as { object: string };
    expect(json.object).toBe(object);
    const sim = simFor(res);
    expect(sim).toBeDefined();
    // The worker that answered is the one the router names.
    expect(res.headers.get("x-radixgate-route")).toMatch(
      /^(cache_hit|cache_miss|imbalanced);match=\d\.\d\d$/,
    );
  });

  it("POST /generate (SGLang native) returns text and meta_info", async () => {
    const res = await postJson(`${fleet.router.url}/generate`, {
      text: "The capital of France is",
      sampling_params: { max_new_tokens: 4 },
    });
    expect(res.status).toBe(200);
    const json = (await res.json()) as { text: string; meta_info: Record<string, unknown> };
    expect(typeof json.text).toBe("string");
    expect(json.meta_info).toHaveProperty("prompt_tokens");
  });

  it("GET /v1/models comes from a healthy worker", async () => {
    const res = await fetch(`${fleet.router.url}/v1/models`);
    expect(res.status).toBe(200);
    const json = (await res.json()) as { data: unknown[] };
    expect(Array.isArray(json.data)).toBe(true);
  });

  it("a query string does not change the route, and reaches the worker as sent", async () => {
    const res = await postJson(`${fleet.router.url}/v1/completions?trace=1`, {
      model: "m",
      prompt: "Once upon a time",
      max_tokens: 2,
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { object: string }).object).toBe("text_completion");
    const wrongPath = await postJson(`${fleet.router.url}/v1/completions/extra?trace=1`, {});
    expect(wrongPath.status).toBe(404);
  });

  it.each(["/get_model_info", "/get_server_info"])(
    "GET %s (SGLang) comes from a worker",
    async (path) => {
      const res = await fetch(`${fleet.router.url}${path}`);
      expect(res.status).toBe(200);
      expect(res.headers.get("x-radixgate-worker")).toMatch(/^[0-9a-f]{10}$/);
      expect(typeof (await res.json())).toBe("object");
    },
  );

  it.each([
    [
      "/v1/chat/completions",
      {
        model: "m",
        messages: [{ role: "user", content: "stream please" }],
        max_tokens: 5,
        stream: true,
      },
    ],
    ["/v1/completions", { model: "m", prompt: "stream please", max_tokens: 5, stream: true }],
    ["/generate", { text: "stream please", sampling_params: { max_new_tokens: 5 }, stream: true }],
  ])("streams %s as server-sent events ending with [DONE]", async (path, body) => {
    const res = await postJson(`${fleet.router.url}${path}`, body);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    const text = await res.text();
    const events = text.split("\n\n").filter((e) => e.startsWith("data: "));
    expect(events.length).toBeGreaterThan(2);
    expect(events.at(-1)).toBe("data: [DONE]");
  });

  it("streams without buffering: the first chunk arrives while the worker is still generating", async () => {
    const slow = await startSimWorker({ id: "slow", timeScale: 1, stepFloorMs: 30 });
    const single = await startTestRouter({ policy: "cache_aware", workerUrls: [slow.url] });
    try {
      const res = await postJson(`${single.url}/v1/chat/completions`, {
        model: "m",
        messages: [{ role: "user", content: "count slowly" }],
        max_tokens: 40,
        stream: true,
      });
      const reader = res.body!.getReader();
      const first = await reader.read();
      expect(first.done).toBe(false);
      // 40 tokens at 30 ms each: the worker is still mid-generation when the first chunk is here.
      expect(slow.stats().inFlight).toBe(1);
      while (!(await reader.read()).done) {}
      await waitFor(
        () => single.context.registry.list()[0]!.inFlight === 0,
        2000,
        "in-flight back to 0",
      );
    } finally {
      await single.stop(100);
      await slow.close();
    }
  });

  it("the same long prefix goes to the same worker (stickiness, seen through HTTP)", async () => {
    const served = new Set<string | null>();
    for (let i = 0; i < 8; i++) {
      const res = await postJson(`${fleet.router.url}/v1/chat/completions`, {
        model: "m",
        messages: [
          { role: "system", content: LONG_SYSTEM },
          { role: "user", content: `Question number ${i}?` },
        ],
        max_tokens: 2,
      });
      await res.arrayBuffer();
      served.add(res.headers.get("x-radixgate-worker"));
      if (i > 0) expect(res.headers.get("x-radixgate-route")).toMatch(/^cache_hit;/);
    }
    expect(served.size).toBe(1);
  });

  it("different prefixes spread over the workers", async () => {
    const served = new Set<string | null>();
    for (let i = 0; i < 8; i++) {
      const res = await postJson(`${fleet.router.url}/v1/completions`, {
        model: "m",
        prompt: `${String.fromCharCode(65 + i).repeat(50)} unique family ${i}`,
        max_tokens: 1,
      });
      await res.arrayBuffer();
      served.add(res.headers.get("x-radixgate-worker"));
    }
    expect(served.size).toBe(4);
  });

  it("passes x-request-id through, and makes one when absent", async () => {
    const given = await postJson(
      `${fleet.router.url}/v1/completions`,
      { prompt: "id", max_tokens: 1 },
      { "x-request-id": "req-123" },
    );
    await given.arrayBuffer();
    expect(given.headers.get("x-request-id")).toBe("req-123");
    const made = await postJson(`${fleet.router.url}/v1/completions`, {
      prompt: "id",
      max_tokens: 1,
    });
    await made.arrayBuffer();
    expect(made.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("a client that disconnects mid-stream aborts the upstream request and in-flight returns to 0", async () => {
    const slow = await startSimWorker({ id: "abort", timeScale: 1, stepFloorMs: 20 });
    const single = await startTestRouter({ policy: "cache_aware", workerUrls: [slow.url] });
    try {
      const controller = new AbortController();
      const res = await postJson(`${single.url}/v1/chat/completions`, {
        model: "m",
        messages: [{ role: "user", content: "a long story" }],
        max_tokens: 500,
        stream: true,
      }).then((r) => r);
      const reader = res.body!.getReader();
      await reader.read();
      controller.abort();
      await reader.cancel();
      await waitFor(() => slow.stats().aborted === 1, 3000, "the worker to see the abort");
      await waitFor(
        () => single.context.registry.list()[0]!.inFlight === 0,
        3000,
        "in-flight back to 0",
      );
      // A client leaving is not the worker's fault.
      expect(single.context.registry.list()[0]!.breaker.consecutiveFailures).toBe(0);
    } finally {
      await single.stop(100);
      await slow.close();
    }
  });

  it("in-flight returns to 0 after many concurrent streams end", async () => {
    const bodies = Array.from({ length: 20 }, (_, i) =>
      postJson(`${fleet.router.url}/v1/completions`, {
        prompt: `p${i}`,
        max_tokens: 3,
        stream: true,
      }).then((r) => r.text()),
    );
    await Promise.all(bodies);
    await waitFor(
      () => fleet.router.context.registry.list().every((w) => w.inFlight === 0),
      2000,
      "in-flight 0",
    );
  });
});

describe("data plane without workers", () => {
  it("answers 503 at once, and readiness is 503, until a worker is added", async () => {
    const router = await startTestRouter({ policy: "cache_aware" });
    const sim = await startSimWorker({ id: "late", timeScale: 0 });
    try {
      const res = await postJson(`${router.url}/v1/completions`, { prompt: "x" });
      expect(res.status).toBe(503);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe(
        "no_workers_available",
      );
      expect((await fetch(`${router.url}/readiness`)).status).toBe(503);
      const added = await postJson(`${router.url}/workers`, { url: sim.url });
      expect(added.status).toBe(202);
      expect((await fetch(`${router.url}/readiness`)).status).toBe(200);
      const ok = await postJson(`${router.url}/v1/completions`, { prompt: "x", max_tokens: 1 });
      expect(ok.status).toBe(200);
    } finally {
      await router.stop(100);
      await sim.close();
    }
  });
});
