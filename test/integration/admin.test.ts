import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import { configWith } from "../../src/config.js";
import { createLogger } from "../../src/logger.js";
import type { RunningRouter } from "../../src/server.js";
import { createRouter } from "../../src/server.js";
import { postJson, startTestRouter } from "../helpers/router.js";

type WorkerJson = {
  id: string;
  url: string;
  healthy: boolean;
  in_flight: number;
  tree_characters: number;
  requests_served: number;
};

describe("admin API (REST and SGLang-compatible)", () => {
  let router: RunningRouter;
  let sims: SimWorker[];

  beforeAll(async () => {
    sims = await Promise.all([
      startSimWorker({ id: "a", timeScale: 0 }),
      startSimWorker({ id: "b", timeScale: 0 }),
    ]);
    router = await startTestRouter();
  });
  afterAll(async () => {
    await router.stop(100);
    await Promise.all(sims.map((s) => s.close()));
  });

  it("POST /workers adds a worker: 202 (SGLang's code) and its record", async () => {
    const res = await postJson(`${router.url}/workers`, { url: sims[0]!.url });
    expect(res.status).toBe(202);
    const record = (await res.json()) as WorkerJson;
    expect(record).toMatchObject({
      url: sims[0]!.url,
      healthy: true,
      in_flight: 0,
      tree_characters: 0,
      requests_served: 0,
    });
    expect(record.id).toMatch(/^[0-9a-f]{10}$/);
  });

  it("POST /workers answers 400 (SGLang's code) for a duplicate (any spelling) and 400 for a bad URL or body", async () => {
    expect((await postJson(`${router.url}/workers`, { url: `${sims[0]!.url}/` })).status).toBe(400);
    const bad = await postJson(`${router.url}/workers`, { url: "not-a-url" });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { code: string } }).error.code).toBe(
      "invalid_worker_url",
    );
    expect((await postJson(`${router.url}/workers`, "{oops")).status).toBe(400);
    expect((await postJson(`${router.url}/workers`, { nope: 1 })).status).toBe(400);
  });

  it("Content-Type as on the data plane: none is taken as JSON, a non-JSON type gets 415", async () => {
    // Bytes, not a string: fetch would add text/plain to a string body.
    const noType = await fetch(`${router.url}/workers`, {
      method: "POST",
      body: new TextEncoder().encode(JSON.stringify({ url: sims[1]!.url })),
    });
    expect(noType.status).toBe(202);
    const id = ((await noType.json()) as WorkerJson).id;
    expect((await fetch(`${router.url}/workers/${id}`, { method: "DELETE" })).status).toBe(202);
    // curl -d without -H sends a form type: refused like /v1/*, with the fix in the message.
    for (const path of ["/workers", "/v1/chat/completions"]) {
      const form = await fetch(`${router.url}${path}`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: JSON.stringify({ url: sims[1]!.url, messages: [] }),
      });
      expect(form.status, path).toBe(415);
      const body = (await form.json()) as { error: { code: string; message: string } };
      expect(body.error.code).toBe("unsupported_media_type");
      expect(body.error.message).toContain("Content-Type: application/json");
    }
  });

  it("GET /workers lists id, url, health, in-flight, tree characters and requests served", async () => {
    await postJson(`${router.url}/v1/completions`, { prompt: "count me", max_tokens: 1 }).then(
      (r) => r.arrayBuffer(),
    );
    const { workers } = (await (await fetch(`${router.url}/workers`)).json()) as {
      workers: WorkerJson[];
    };
    expect(workers).toHaveLength(1);
    expect(workers[0]).toMatchObject({ url: sims[0]!.url, requests_served: 1, in_flight: 0 });
    expect(workers[0]!.tree_characters).toBe("count me".length);
  });

  it("GET /workers/{id} finds a worker by id or by URL-encoded URL, 404 otherwise", async () => {
    const { workers } = (await (await fetch(`${router.url}/workers`)).json()) as {
      workers: WorkerJson[];
    };
    const id = workers[0]!.id;
    expect((await fetch(`${router.url}/workers/${id}`)).status).toBe(200);
    const byUrl = await fetch(`${router.url}/workers/${encodeURIComponent(sims[0]!.url)}`);
    expect(byUrl.status).toBe(200);
    expect(((await byUrl.json()) as WorkerJson).id).toBe(id);
    expect((await fetch(`${router.url}/workers/0000000000`)).status).toBe(404);
  });

  it("SGLang style: /add_worker, /list_workers, /remove_worker", async () => {
    const add = await fetch(`${router.url}/add_worker?url=${encodeURIComponent(sims[1]!.url)}`, {
      method: "POST",
    });
    expect(add.status).toBe(200);
    const list = (await (await fetch(`${router.url}/list_workers`)).json()) as { urls: string[] };
    expect(list.urls).toEqual([sims[0]!.url, sims[1]!.url]);
    expect(
      (
        await fetch(`${router.url}/add_worker?url=${encodeURIComponent(sims[1]!.url)}`, {
          method: "POST",
        })
      ).status,
    ).toBe(400);
    expect((await fetch(`${router.url}/add_worker`, { method: "POST" })).status).toBe(400);
    const remove = await fetch(
      `${router.url}/remove_worker?url=${encodeURIComponent(sims[1]!.url)}`,
      { method: "POST" },
    );
    expect(remove.status).toBe(200);
    expect(
      (
        await fetch(`${router.url}/remove_worker?url=${encodeURIComponent(sims[1]!.url)}`, {
          method: "POST",
        })
      ).status,
    ).toBe(404);
    const after = (await (await fetch(`${router.url}/list_workers`)).json()) as { urls: string[] };
    expect(after.urls).toEqual([sims[0]!.url]);
  });

  it("DELETE /workers/{id} removes the worker and drops its tree; 404 when unknown", async () => {
    const { workers } = (await (await fetch(`${router.url}/workers`)).json()) as {
      workers: WorkerJson[];
    };
    const worker = router.context.registry.get(workers[0]!.id)!;
    expect(router.context.index.size(worker.id)).toBeGreaterThan(0);
    const res = await fetch(`${router.url}/workers/${workers[0]!.id}`, { method: "DELETE" });
    expect(res.status).toBe(202);
    expect(router.context.index.size(worker.id)).toBe(0);
    expect(worker.toJSON().tree_characters).toBe(0);
    expect(
      (await fetch(`${router.url}/workers/${workers[0]!.id}`, { method: "DELETE" })).status,
    ).toBe(404);
    expect(router.context.registry.size).toBe(0);
  });
});

describe("admin API authorization", () => {
  it("with --admin-api-key: 401 without or with a wrong key, 200 with the right one", async () => {
    const router = await startTestRouter({ adminApiKey: "s3cret" });
    try {
      expect((await fetch(`${router.url}/workers`)).status).toBe(401);
      expect(
        (await fetch(`${router.url}/workers`, { headers: { authorization: "Bearer nope" } }))
          .status,
      ).toBe(401);
      const ok = await fetch(`${router.url}/workers`, {
        headers: { authorization: "Bearer s3cret" },
      });
      expect(ok.status).toBe(200);
      // The data plane and ops routes do not need the admin key.
      expect((await fetch(`${router.url}/health`)).status).toBe(200);
    } finally {
      await router.stop(100);
    }
  });

  it("without an admin key: loopback clients are served, others get 403", async () => {
    const { app, context } = createRouter(configWith({ logLevel: "silent" }), {
      logger: createLogger({ level: "silent" }),
    });
    const as = (remoteAddress: string) =>
      ({ incoming: { socket: { remoteAddress } }, outgoing: {} }) as never;
    expect((await app.request("/workers", {}, as("10.1.2.3"))).status).toBe(403);
    expect((await app.request("/list_workers", {}, as("192.168.0.7"))).status).toBe(403);
    expect(
      (await app.request("/add_worker?url=http://x:1", { method: "POST" }, as("::ffff:10.0.0.9")))
        .status,
    ).toBe(403);
    expect((await app.request("/workers", {}, as("127.0.0.1"))).status).toBe(200);
    expect((await app.request("/workers", {}, as("::1"))).status).toBe(200);
    expect((await app.request("/workers", {}, as("::ffff:127.0.0.1"))).status).toBe(200);
    expect(context.registry.size).toBe(0);
  });

  it("with --api-key the data plane needs the bearer key; ops routes stay open", async () => {
    const router = await startTestRouter({ apiKey: "data-key" });
    try {
      const denied = await postJson(`${router.url}/v1/completions`, { prompt: "x" });
      expect(denied.status).toBe(401);
      expect(((await denied.json()) as { error: { code: string } }).error.code).toBe(
        "unauthorized",
      );
      const allowed = await postJson(
        `${router.url}/v1/completions`,
        { prompt: "x" },
        { authorization: "Bearer data-key" },
      );
      expect(allowed.status).toBe(503); // authorized, but no workers yet
      expect((await fetch(`${router.url}/metrics`)).status).toBe(200);
    } finally {
      await router.stop(100);
    }
  });
});

describe("admin API: worker_type (issue 25)", () => {
  let router: RunningRouter;
  beforeAll(async () => {
    router = await startTestRouter();
  });
  afterAll(async () => {
    await router.stop(100);
  });

  it("a router without disaggregation refuses a prefill or decode worker, saying which flag it needs", async () => {
    const res = await postJson(`${router.url}/workers`, {
      url: "http://127.0.0.1:7",
      worker_type: "prefill",
      bootstrap_port: 8998,
    });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: { message: string } };
    expect(body.error.message).toMatch(/--pd-disaggregation/);
    const legacy = await fetch(
      `${router.url}/add_worker?url=${encodeURIComponent("http://127.0.0.1:7")}&worker_type=decode`,
      { method: "POST" },
    );
    expect(legacy.status).toBe(400);
  });

  it("a bad worker_type or bootstrap_port is a 400 that names the field", async () => {
    const bad = await postJson(`${router.url}/workers`, {
      url: "http://127.0.0.1:7",
      worker_type: "encode",
    });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { message: string } }).error.message).toMatch(
      /worker_type must be one of/,
    );
    const port = await postJson(`${router.url}/workers`, {
      url: "http://127.0.0.1:7",
      worker_type: "prefill",
      bootstrap_port: "x",
    });
    expect(port.status).toBe(400);
    expect(router.context.registry.size).toBe(0);
  });
});
