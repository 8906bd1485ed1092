import { describe, expect, it } from "vitest";
import { startSimWorker } from "../../sim/worker.js";
import { captureLogs } from "../helpers/log-capture.js";
import { postJson, startTestRouter } from "../helpers/router.js";

describe("logging", () => {
  it("writes one JSON line per request with id, endpoint, worker, branch, match rate, status, timings", async () => {
    const sim = await startSimWorker({ id: "log", timeScale: 0 });
    const { entries: logged, logger } = captureLogs();
    const router = await startTestRouter({ policy: "cache_aware", workerUrls: [sim.url] }, logger);
    try {
      const res = await postJson(
        `${router.url}/v1/completions`,
        { prompt: "log me", max_tokens: 1 },
        { "x-request-id": "abc-1" },
      );
      await res.arrayBuffer();
      await new Promise((r) => setTimeout(r, 20));
      const entries = logged.filter((e) => e.msg === "request");
      expect(entries).toHaveLength(1);
      expect(entries[0]).toMatchObject({
        request_id: "abc-1",
        endpoint: "completions",
        worker_url: sim.url,
        branch: "cache_miss",
        match_rate: 0,
        status: 200,
        attempts: 1,
        level: 30,
      });
      expect(typeof entries[0]!.duration_ms).toBe("number");
      expect(typeof entries[0]!.ttfb_ms).toBe("number");
    } finally {
      await router.stop(100);
      await sim.close();
    }
  });

  it("never writes API keys or authorization headers", async () => {
    const sim = await startSimWorker({ id: "secret", timeScale: 0 });
    const { lines, logger } = captureLogs();
    const router = await startTestRouter(
      {
        policy: "cache_aware",
        workerUrls: [sim.url],
        apiKey: "data-SECRET-1",
        adminApiKey: "admin-SECRET-2",
      },
      logger,
    );
    try {
      await postJson(
        `${router.url}/v1/completions`,
        { prompt: "x", max_tokens: 1 },
        { authorization: "Bearer data-SECRET-1" },
      ).then((r) => r.arrayBuffer());
      await postJson(
        `${router.url}/v1/completions`,
        { prompt: "x" },
        { authorization: "Bearer wrong-SECRET-3" },
      ).then((r) => r.arrayBuffer());
      await fetch(`${router.url}/workers`, {
        headers: { authorization: "Bearer admin-SECRET-2" },
      }).then((r) => r.arrayBuffer());
      logger.info(
        {
          config: { apiKey: "data-SECRET-1", adminApiKey: "admin-SECRET-2" },
          headers: { authorization: "Bearer x-SECRET-4" },
        },
        "probe",
      );
      await router.stop(100);
      const all = lines.join("\n");
      expect(all).toContain("probe");
      expect(all).not.toMatch(/SECRET/);
    } finally {
      await router.stop(100);
      await sim.close();
    }
  });
});
