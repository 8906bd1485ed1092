import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import type { RunningRouter } from "../../src/server.js";
import { startTestRouter } from "../helpers/router.js";

/*
 * CORS as SGLang's gateway sets it up (create_cors_layer, sgl-model-gateway/src/server.rs): no
 * --cors-allowed-origins = any origin, method and header; a list = those origins, GET/POST/OPTIONS,
 * content-type and authorization, x-request-id exposed; preflights cached 3600 s.
 */

const CHAT = JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] });

function preflight(url: string, origin: string): Promise<Response> {
  return fetch(url, {
    method: "OPTIONS",
    headers: {
      origin,
      "access-control-request-method": "POST",
      "access-control-request-headers": "content-type",
    },
  });
}

describe("CORS (--cors-allowed-origins)", () => {
  let sim: SimWorker;
  let open: RunningRouter;
  let listed: RunningRouter;

  beforeAll(async () => {
    sim = await startSimWorker({ id: "c", timeScale: 0, model: "m" });
    open = await startTestRouter({ workerUrls: [sim.url] });
    listed = await startTestRouter({
      workerUrls: [sim.url],
      corsAllowedOrigins: ["https://app.example"],
    });
  });
  afterAll(async () => {
    await Promise.all([open.stop(100), listed.stop(100)]);
    await sim.close();
  });

  it("by default any origin: a preflight answers 200 with *, and the data plane's answer carries *", async () => {
    const pre = await preflight(`${open.url}/v1/chat/completions`, "https://anywhere.example");
    expect(pre.status).toBe(200);
    expect(pre.headers.get("access-control-allow-origin")).toBe("*");
    expect(pre.headers.get("access-control-allow-methods")).toBe("*");
    expect(pre.headers.get("access-control-allow-headers")).toBe("*");
    expect(pre.headers.get("access-control-max-age")).toBe("3600");
    expect(sim.stats().requests).toBe(0);

    const res = await fetch(`${open.url}/v1/chat/completions`, {
      method: "POST",
      headers: { origin: "https://anywhere.example", "content-type": "application/json" },
      body: CHAT,
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("access-control-allow-origin")).toBe("*");
    await res.arrayBuffer();
    const health = await fetch(`${open.url}/health`, { headers: { origin: "https://x.example" } });
    expect(health.headers.get("access-control-allow-origin")).toBe("*");
  });

  it("a request without Origin gets no CORS headers", async () => {
    const res = await fetch(`${open.url}/health`);
    expect(res.headers.get("access-control-allow-origin")).toBeNull();
  });

  it("the admin API never answers cross-origin, whatever the setting", async () => {
    for (const path of ["/workers", "/add_worker", "/flush_cache", "/debug/route/v1/completions"]) {
      const pre = await preflight(`${open.url}${path}`, "https://anywhere.example");
      expect(pre.headers.get("access-control-allow-origin"), path).toBeNull();
      const res = await fetch(`${open.url}${path}`, { headers: { origin: "https://a.example" } });
      expect(res.headers.get("access-control-allow-origin"), path).toBeNull();
      await res.arrayBuffer();
    }
  });

  it("with a list: a listed origin is echoed with SGLang's methods and headers; another gets none", async () => {
    const pre = await preflight(`${listed.url}/v1/chat/completions`, "https://app.example");
    expect(pre.status).toBe(200);
    expect(pre.headers.get("access-control-allow-origin")).toBe("https://app.example");
    expect(pre.headers.get("access-control-allow-methods")).toBe("GET, POST, OPTIONS");
    expect(pre.headers.get("access-control-allow-headers")).toBe("content-type, authorization");
    expect(pre.headers.get("vary")).toContain("Origin");

    const res = await fetch(`${listed.url}/v1/models`, {
      headers: { origin: "https://app.example" },
    });
    expect(res.headers.get("access-control-allow-origin")).toBe("https://app.example");
    expect(res.headers.get("access-control-expose-headers")).toBe("x-request-id");
    await res.arrayBuffer();

    const other = await preflight(`${listed.url}/v1/chat/completions`, "https://evil.example");
    expect(other.headers.get("access-control-allow-origin")).toBeNull();
    await other.arrayBuffer();
  });
});
