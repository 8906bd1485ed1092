import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import type { RunningRouter } from "../../src/server.js";
import { startTestRouter } from "../helpers/router.js";

const WORKER_KEY = "sk-worker-secret-0123456789";

// Regression: GET /get_server_info was relayed byte for byte with the worker's key, and SGLang's
// answer lists its server arguments, api_key and admin_api_key among them.
describe("engine info routes never hand out the workers' keys", () => {
  let sim: SimWorker;
  let router: RunningRouter;
  beforeAll(async () => {
    sim = await startSimWorker({ id: "w", timeScale: 0, apiKey: WORKER_KEY });
    router = await startTestRouter({ workerUrls: [sim.url], workerApiKey: WORKER_KEY });
  });
  afterAll(async () => {
    await router.stop(100);
    await sim.close();
  });

  it("the worker itself lists its key in /get_server_info (as SGLang does)", async () => {
    const res = await fetch(`${sim.url}/get_server_info`, {
      headers: { authorization: `Bearer ${WORKER_KEY}` },
    });
    expect(await res.text()).toContain(WORKER_KEY);
  });

  it.each(["/get_server_info", "/get_model_info", "/v1/models"])(
    "GET %s through the router: no key, token or password field, the rest kept",
    async (path) => {
      const res = await fetch(`${router.url}${path}`);
      expect(res.status).toBe(200);
      const text = await res.text();
      expect(text).not.toContain(WORKER_KEY);
      expect(text).not.toMatch(/"(api_key|admin_api_key|ssl_keyfile_password)"/);
      if (path === "/get_server_info") {
        const info = JSON.parse(text) as Record<string, unknown>;
        expect(info.max_total_num_tokens).toBeGreaterThan(0);
        expect(res.headers.get("x-radixgate-worker")).toMatch(/^[0-9a-f]{10}$/);
      }
    },
  );
});
