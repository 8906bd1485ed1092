import { request } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import { ERROR_CATALOG, type ErrorCode } from "../../src/errors.js";
import type { RunningRouter } from "../../src/server.js";
import { postJson, startTestRouter, waitFor } from "../helpers/router.js";
import { chat, errorCode } from "./support.js";

const LIMIT = 4096;
const DATA_PLANE = ["/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/generate"];

/** Every router error: the catalog's status and type, a message, the OpenAI shape. */
async function expectRouterError(res: Response, code: ErrorCode): Promise<void> {
  expect(res.status).toBe(ERROR_CATALOG[code].status);
  expect(res.headers.get("content-type")).toContain("application/json");
  expect(res.headers.get("x-radixgate-worker")).toBeNull();
  const body = (await res.json()) as { error: Record<string, unknown> };
  expect(Object.keys(body)).toEqual(["error"]);
  expect(body.error).toMatchObject({ code, type: ERROR_CATALOG[code].type });
  expect(typeof body.error.message).toBe("string");
  expect((body.error.message as string).length).toBeGreaterThan(0);
}

/** POST with a chunked body (no Content-Length), sending `chunks` of `size` bytes. */
function postChunked(
  url: string,
  chunks: number,
  size: number,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, {
      method: "POST",
      headers: { "content-type": "application/json", "transfer-encoding": "chunked" },
    });
    req.on("response", (res) => {
      let body = "";
      res.on("data", (c: Buffer) => (body += c));
      res.on("end", () => {
        resolve({ status: res.statusCode ?? 0, body });
        req.destroy();
      });
    });
    // The router may close the connection while we are still sending: that is the point.
    req.on("error", (err) => {
      if (!req.destroyed) reject(err);
    });
    let sent = 0;
    const next = () => {
      if (sent === chunks) return void req.end();
      sent += 1;
      req.write(Buffer.alloc(size, 32), () => setImmediate(next));
    };
    next();
  });
}

describe("bad input: a clear error and nothing else disturbed", () => {
  let sim: SimWorker;
  let router: RunningRouter;

  beforeAll(async () => {
    sim = await startSimWorker({ id: "victim", timeScale: 0 });
    router = await startTestRouter({ workerUrls: [sim.url], maxPayloadSize: LIMIT });
  });
  afterAll(async () => {
    await router.stop(100);
    await sim.close();
  });

  /** Runs `act` and checks that no worker was contacted and the router still serves. */
  async function untouched(act: () => Promise<void>): Promise<void> {
    const before = sim.stats().requests;
    await act();
    expect(sim.stats().requests).toBe(before);
    const ok = await chat(router.url, "still fine?");
    expect(ok.status).toBe(200);
    await ok.arrayBuffer();
    await waitFor(() => router.context.registry.list()[0]!.inFlight === 0, 2000, "in-flight 0");
  }

  it.each(DATA_PLANE)("POST %s with malformed JSON: 400 invalid_json", async (path) => {
    await untouched(async () => {
      await expectRouterError(
        await postJson(`${router.url}${path}`, '{"model": "m",'),
        "invalid_json",
      );
    });
  });

  it.each(['"a string"', "[1,2]", "null", "42"])(
    "a JSON body that is not an object (%s): 400 invalid_request",
    async (raw) => {
      await untouched(async () => {
        await expectRouterError(
          await postJson(`${router.url}/v1/completions`, raw),
          "invalid_request",
        );
      });
    },
  );

  it("a body over maxPayloadSize with Content-Length: 413 before any worker is contacted", async () => {
    await untouched(async () => {
      const prompt = "x".repeat(LIMIT);
      await expectRouterError(
        await postJson(`${router.url}/v1/completions`, { prompt }),
        "payload_too_large",
      );
    });
  });

  it("a chunked body (no Content-Length) that grows over maxPayloadSize: 413 before any worker is contacted", async () => {
    await untouched(async () => {
      const { status, body } = await postChunked(`${router.url}/v1/chat/completions`, 8, 1024);
      expect(status).toBe(413);
      expect((JSON.parse(body) as { error: { code: string } }).error.code).toBe(
        "payload_too_large",
      );
    });
  });

  it("a body of exactly maxPayloadSize bytes is accepted", async () => {
    const template = JSON.stringify({ prompt: "", max_tokens: 1 });
    const body = JSON.stringify({ prompt: "y".repeat(LIMIT - template.length), max_tokens: 1 });
    expect(Buffer.byteLength(body)).toBe(LIMIT);
    const res = await postJson(`${router.url}/v1/completions`, body);
    expect(res.status).toBe(200);
    await res.arrayBuffer();
  });

  it.each(["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"])(
    "Content-Type %s: 415 unsupported_media_type",
    async (type) => {
      await untouched(async () => {
        const res = await fetch(`${router.url}/v1/chat/completions`, {
          method: "POST",
          headers: { "content-type": type },
          body: '{"messages": []}',
        });
        await expectRouterError(res, "unsupported_media_type");
      });
    },
  );

  it.each([
    ["GET", "/v2/chat"],
    ["POST", "/v1/chat/completion"],
    ["DELETE", "/nothing/here"],
    ["PUT", "/"],
  ])("%s %s (unknown route): 404 not_found", async (method, path) => {
    await untouched(async () => {
      await expectRouterError(await fetch(`${router.url}${path}`, { method }), "not_found");
    });
  });

  it("no worker available (all unhealthy): 503 no_workers_available at once, nothing contacted", async () => {
    const worker = router.context.registry.list()[0]!;
    worker.healthy = false;
    try {
      const before = sim.stats().requests;
      const res = await chat(router.url, "anyone?");
      await expectRouterError(res, "no_workers_available");
      expect(sim.stats().requests).toBe(before);
      expect((await fetch(`${router.url}/readiness`)).status).toBe(503);
    } finally {
      worker.healthy = true;
    }
    expect((await chat(router.url, "back")).status).toBe(200);
  });

  // Status codes of the admin API are tested in test/integration/admin.test.ts (400 bad URL,
  // 400 duplicate, 404 unknown, 401 wrong key); here: they are all catalog errors in the OpenAI shape.
  it("admin API errors are OpenAI-shaped catalog errors", async () => {
    await untouched(async () => {
      await expectRouterError(
        await postJson(`${router.url}/workers`, { url: "ftp://nope" }),
        "invalid_worker_url",
      );
      await expectRouterError(
        await postJson(`${router.url}/workers`, { url: sim.url }),
        "worker_exists",
      );
      await expectRouterError(await postJson(`${router.url}/workers`, "{"), "invalid_json");
      await expectRouterError(
        await fetch(`${router.url}/workers/ffffffffff`, { method: "DELETE" }),
        "worker_not_found",
      );
      await expectRouterError(
        await fetch(`${router.url}/remove_worker`, { method: "POST" }),
        "invalid_worker_url",
      );
    });
    const keyed = await startTestRouter({ adminApiKey: "k" });
    try {
      await expectRouterError(
        await fetch(`${keyed.url}/workers`, { headers: { authorization: "Bearer wrong" } }),
        "unauthorized",
      );
    } finally {
      await keyed.stop(100);
    }
    expect(router.context.registry.size).toBe(1);
  });

  it("a wrong method on a data-plane route: 405 method_not_allowed", async () => {
    await untouched(async () => {
      const res = await fetch(`${router.url}/v1/completions`, { method: "PUT", body: "{}" });
      await expectRouterError(res, "method_not_allowed");
      expect(res.headers.get("allow")).toBe("POST");
    });
  });

  it("every error code in the catalog has a 4xx/5xx status and an OpenAI error type", () => {
    const types = new Set([
      "invalid_request_error",
      "authentication_error",
      "permission_error",
      // A tenant over its own --tenant-quota: the client's limit, not the fleet's capacity.
      "rate_limit_error",
      "server_error",
    ]);
    for (const [code, entry] of Object.entries(ERROR_CATALOG)) {
      expect(entry.status, code).toBeGreaterThanOrEqual(400);
      expect(entry.status, code).toBeLessThan(600);
      expect(types.has(entry.type), code).toBe(true);
    }
  });

  it("the router still reports the errors in its metrics and serves afterwards", async () => {
    const text = await (await fetch(`${router.url}/metrics`)).text();
    expect(text).toMatch(/radixgate_requests_total\{endpoint="chat",status="400"\} \d+/);
    expect(await errorCode(await postJson(`${router.url}/generate`, "nope"))).toBe("invalid_json");
  });
});
