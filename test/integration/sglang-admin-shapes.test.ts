import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import type { RunningRouter } from "../../src/server.js";
import { deadUrl } from "../faults/support.js";
import { postJson, startTestRouter } from "../helpers/router.js";

/*
 * The SGLang admin API's requests and answers, read from its source:
 * - W = sgl-model-gateway/src/core/worker_service.rs (CreateWorkerResult: 202, Location,
 *   {status: "accepted", worker_id, url, location, message}; Delete/UpdateWorkerResult: 202
 *   {status, worker_id, message}; ListWorkersResult: {workers, total, stats: {prefill_count,
 *   decode_count, regular_count}}; NotFound: 404);
 * - S = sgl-model-gateway/src/protocols/worker_spec.rs (WorkerConfigRequest: url, api_key,
 *   model_id, priority, cost, worker_type, bootstrap_port, labels; WorkerInfo: id, url, model_id,
 *   priority, cost, worker_type, is_healthy, load, connection_mode; WorkerUpdateRequest:
 *   priority, cost, labels);
 * - R = sgl-model-gateway/src/server.rs (readiness: 200 {status: "ready", healthy_workers,
 *   total_workers} or 503 {status: "not ready", reason}; liveness and /health: 200 "OK"; routes
 *   with axum's method routers, so another method on a known path is 405);
 * - Q = sgl-router/src/server.rs (AddWorkerQuery {url, api_key}; a failed add answers 400).
 */

const WORKER_INFO_FIELDS = [
  "id",
  "url",
  "model_id",
  "priority",
  "cost",
  "worker_type",
  "is_healthy",
  "load",
  "connection_mode",
] as const;

type Json = Record<string, unknown>;

describe("SGLang's admin API shapes and codes (table from its router's source)", () => {
  let router: RunningRouter;
  let sims: SimWorker[];
  let keyed: SimWorker;

  beforeAll(async () => {
    sims = await Promise.all([
      startSimWorker({ id: "a", timeScale: 0, model: "m-a" }),
      startSimWorker({ id: "b", timeScale: 0, model: "m-b" }),
    ]);
    keyed = await startSimWorker({ id: "k", timeScale: 0, apiKey: "sk-worker-k", model: "m" });
    // Real first probes (checks on), so health and disable_health_check show.
    router = await startTestRouter({ healthCheckIntervalSecs: 3600 });
  });
  afterAll(async () => {
    await router.stop(100);
    await Promise.all([...sims, keyed].map((s) => s.close()));
  });

  it("R: /health and /liveness answer 200 OK; /readiness with no worker: 503 {status: 'not ready', reason}", async () => {
    for (const path of ["/health", "/liveness"]) {
      const res = await fetch(`${router.url}${path}`);
      expect(res.status, path).toBe(200);
      expect(await res.text(), path).toBe("OK");
    }
    const res = await fetch(`${router.url}/readiness`);
    expect(res.status).toBe(503);
    expect(await res.json()).toMatchObject({ status: "not ready", reason: expect.any(String) });
  });

  it("W+S: POST /workers with every field of WorkerConfigRequest: 202, Location, accepted", async () => {
    const res = await postJson(`${router.url}/workers`, {
      url: sims[0]!.url,
      model_id: "m-a",
      priority: 70,
      cost: 2.5,
      labels: { zone: "a" },
      disable_health_check: false,
      worker_type: "regular",
    });
    expect(res.status).toBe(202);
    const body = (await res.json()) as Json;
    expect(body).toMatchObject({
      status: "accepted",
      worker_id: expect.any(String),
      url: sims[0]!.url,
      location: `/workers/${body.worker_id}`,
      message: expect.any(String),
    });
    expect(res.headers.get("location")).toBe(body.location);
    // The Location answers with the worker's WorkerInfo.
    const info = (await (await fetch(`${router.url}${body.location}`)).json()) as Json;
    for (const field of WORKER_INFO_FIELDS) expect(info, field).toHaveProperty(field);
    expect(info).toMatchObject({
      id: body.worker_id,
      model_id: "m-a",
      priority: 70,
      cost: 2.5,
      worker_type: "regular",
      is_healthy: true,
      load: 0,
      connection_mode: "http",
      labels: { zone: "a" },
      // radixgate's own fields stay beside SGLang's names.
      healthy: true,
      in_flight: 0,
    });
  });

  it("Q: a duplicate add is 400 (POST /workers and /add_worker)", async () => {
    expect((await postJson(`${router.url}/workers`, { url: sims[0]!.url })).status).toBe(400);
    const again = await fetch(`${router.url}/add_worker?url=${encodeURIComponent(sims[0]!.url)}`, {
      method: "POST",
    });
    expect(again.status).toBe(400);
  });

  it("S: bad field values are 400 with a message naming the field", async () => {
    for (const [field, value] of [
      ["priority", -1],
      ["priority", 1.5],
      ["cost", "cheap"],
      ["labels", { zone: 1 }],
      ["labels", ["a"]],
      ["model_id", ""],
      ["disable_health_check", "yes"],
    ] as const) {
      const res = await postJson(`${router.url}/workers`, { url: sims[1]!.url, [field]: value });
      expect(res.status, `${field}=${JSON.stringify(value)}`).toBe(400);
      expect(((await res.json()) as { error: { message: string } }).error.message).toContain(field);
    }
    expect(router.context.registry.get(sims[1]!.url)).toBeUndefined();
  });

  it("Q: /add_worker?url=…&api_key=K registers the worker with its key", async () => {
    const res = await fetch(
      `${router.url}/add_worker?url=${encodeURIComponent(keyed.url)}&api_key=sk-worker-k`,
      { method: "POST" },
    );
    expect(res.status).toBe(200);
    const worker = router.context.registry.get(keyed.url)!;
    expect(worker.authorization).toBe("Bearer sk-worker-k");
    // The key-protected engine passed its first probe with that key, and the key is never shown.
    expect(worker.healthy).toBe(true);
    expect(await (await fetch(`${router.url}/workers`)).text()).not.toContain("sk-worker-k");
  });

  it("W: GET /workers has workers, total and stats by type; /readiness counts as SGLang's", async () => {
    const list = (await (await fetch(`${router.url}/workers`)).json()) as {
      workers: Json[];
      total: number;
      stats: Json;
    };
    expect(list.total).toBe(2);
    expect(list.workers).toHaveLength(2);
    expect(list.stats).toEqual({ prefill_count: 0, decode_count: 0, regular_count: 2 });
    for (const w of list.workers)
      for (const field of WORKER_INFO_FIELDS) expect(w, field).toHaveProperty(field);
    const ready = await fetch(`${router.url}/readiness`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({
      status: "ready",
      healthy_workers: 2,
      total_workers: 2,
    });
  });

  it("S: disable_health_check: a worker that would fail its probe is taken as healthy", async () => {
    const [down1, down2] = [await deadUrl(), await deadUrl()];
    const probed = (await (await postJson(`${router.url}/workers`, { url: down1 })).json()) as Json;
    expect(probed).toMatchObject({ is_healthy: false });
    const trusted = await postJson(`${router.url}/workers`, {
      url: down2,
      disable_health_check: true,
    });
    expect(trusted.status).toBe(202);
    expect(await trusted.json()).toMatchObject({ is_healthy: true, disable_health_check: true });
    await router.context.health.checkAll();
    expect(router.context.registry.get(down2)!.healthy).toBe(true);
    for (const url of [down1, down2])
      await fetch(`${router.url}/workers/${encodeURIComponent(url)}`, { method: "DELETE" });
  });

  it("W+S: PUT /workers/{id} changes priority, cost and labels: 202; other fields 400", async () => {
    const id = router.context.registry.get(sims[0]!.url)!.id;
    const res = await fetch(`${router.url}/workers/${id}`, {
      method: "PUT",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ priority: 10, cost: 0.5, labels: { zone: "b" } }),
    });
    expect(res.status).toBe(202);
    expect(await res.json()).toMatchObject({ status: "accepted", worker_id: id });
    expect(await (await fetch(`${router.url}/workers/${id}`)).json()).toMatchObject({
      priority: 10,
      cost: 0.5,
      labels: { zone: "b" },
      model_id: "m-a",
    });
    const other = await fetch(`${router.url}/workers/${id}`, {
      method: "PUT",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ url: "http://127.0.0.1:1" }),
    });
    expect(other.status).toBe(400);
    const missing = await fetch(`${router.url}/workers/0000000000`, {
      method: "PUT",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ priority: 1 }),
    });
    expect(missing.status).toBe(404);
  });

  it("R: another method on a known admin path is 405 with Allow", async () => {
    for (const [method, path, allow] of [
      ["PATCH", "/workers", "GET, POST"],
      ["POST", "/workers/x", "GET, PUT, DELETE"],
      ["GET", "/add_worker", "POST"],
      ["GET", "/remove_worker", "POST"],
      ["POST", "/list_workers", "GET"],
    ] as const) {
      const res = await fetch(`${router.url}${path}`, { method });
      expect(res.status, `${method} ${path}`).toBe(405);
      expect(res.headers.get("allow")).toBe(allow);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe(
        "method_not_allowed",
      );
    }
  });

  it("W: DELETE /workers/{id}: 202 accepted, then 404", async () => {
    const id = router.context.registry.get(keyed.url)!.id;
    const res = await fetch(`${router.url}/workers/${id}`, { method: "DELETE" });
    expect(res.status).toBe(202);
    expect(await res.json()).toMatchObject({ status: "accepted", worker_id: id });
    expect((await fetch(`${router.url}/workers/${id}`, { method: "DELETE" })).status).toBe(404);
    expect((await fetch(`${router.url}/workers/${id}`)).status).toBe(404);
  });
});
