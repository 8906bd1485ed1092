import { afterEach, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import { type ConfigOverrides, configWith } from "../../src/config.js";
import { type RunningRouter, startRouter } from "../../src/server.js";
import { deadUrl, metric } from "../faults/support.js";
import { captureLogs } from "../helpers/log-capture.js";
import { postJson } from "../helpers/router.js";

interface LogLine {
  msg: string;
  url?: string;
  level: number;
  count?: number;
  first?: { url: string; reason: string }[];
}

/** A router with health checks on (a long interval: only the first probe matters here). */
async function startProbingRouter(
  overrides: ConfigOverrides,
): Promise<{ router: RunningRouter; logs: LogLine[] }> {
  const { logger, entries: logs } = captureLogs<LogLine>("info");
  const router = await startRouter(
    configWith({
      host: "127.0.0.1",
      port: 0,
      healthCheckIntervalSecs: 60,
      healthCheckTimeoutSecs: 2,
      evictionIntervalSecs: 0,
      ...overrides,
    }),
    { logger },
  );
  return { router, logs };
}

describe("first health probe: a worker takes traffic only once it has answered", () => {
  let router: RunningRouter | undefined;
  let sim: SimWorker | undefined;
  afterEach(async () => {
    await router?.stop(100);
    await sim?.close();
    router = undefined;
    sim = undefined;
  });

  it("regression: a worker down at start is reported unhealthy at once, and logged", async () => {
    const dead = await deadUrl();
    sim = await startSimWorker({ id: "up", timeScale: 0 });
    const started = await startProbingRouter({ workerUrls: [dead, sim.url] });
    router = started.router;
    const workers = (await (await fetch(`${router.url}/workers`)).json()) as {
      workers: { url: string; healthy: boolean }[];
    };
    expect(workers.workers.find((w) => w.url === dead)?.healthy).toBe(false);
    expect(workers.workers.find((w) => w.url === sim!.url)?.healthy).toBe(true);
    const readiness = await (await fetch(`${router.url}/readiness`)).json();
    expect(readiness).toMatchObject({ status: "ready", workers: 2, healthy: 1 });
    // Every request goes to the live worker on its first attempt.
    for (let i = 0; i < 4; i++) {
      const res = await postJson(`${router.url}/v1/completions`, {
        prompt: `p${i}`,
        max_tokens: 1,
      });
      expect(res.status).toBe(200);
      await res.arrayBuffer();
    }
    expect(await metric(router.url, "radixgate_retries_total")).toBe(0);
    expect(await metric(router.url, "radixgate_upstream_errors_total")).toBe(0);
    const probeLogs = started.logs.filter(
      (l) => l.url === dead && l.level === 40 && /first health check/.test(l.msg),
    );
    expect(probeLogs).toHaveLength(1);
  });

  it("/readiness is 503 from the start when the only worker is down", async () => {
    const started = await startProbingRouter({ workerUrls: [await deadUrl()] });
    router = started.router;
    const res = await fetch(`${router.url}/readiness`);
    expect(res.status).toBe(503);
    expect(await res.json()).toMatchObject({ healthy: 0, workers: 1 });
  });

  it("a worker added through the admin API is probed before it is listed healthy", async () => {
    const started = await startProbingRouter({ workerUrls: [] });
    router = started.router;
    const dead = await deadUrl();
    const added = await postJson(`${router.url}/workers`, { url: dead });
    expect(added.status).toBe(202);
    expect(await added.json()).toMatchObject({ url: dead, healthy: false });
    expect((await fetch(`${router.url}/readiness`)).status).toBe(503);
    sim = await startSimWorker({ id: "late", timeScale: 0 });
    const live = await postJson(`${router.url}/workers`, { url: sim.url });
    expect(await live.json()).toMatchObject({ url: sim.url, healthy: true });
    expect((await fetch(`${router.url}/readiness`)).status).toBe(200);
  });

  it("200 workers failing their first check at once: a few warn lines that count and name them, not 200", async () => {
    // A worker file or discovery list of 10k unreachable entries wrote a warn line each (3.3 MB).
    const dead = await Promise.all(Array.from({ length: 200 }, () => deadUrl()));
    const started = await startProbingRouter({ workerUrls: dead });
    router = started.router;
    await router.stop(100);
    router = undefined;
    const failed = started.logs.filter((l) => l.level === 40 && /first health check/.test(l.msg));
    expect(failed.length).toBeLessThanOrEqual(3);
    // The first as it came; the rest in summaries that name the first few of each, with why.
    expect(dead).toContain(failed[0]?.url);
    const summaries = failed.filter((l) => l.count !== undefined);
    expect(1 + summaries.reduce((sum, l) => sum + (l.count as number), 0)).toBe(200);
    expect(summaries[0]?.msg).toMatch(/^\d+ more workers failed their first health check/);
    for (const named of summaries[0]?.first ?? []) {
      expect(dead).toContain(named.url);
      expect(named.reason).toBe("ECONNREFUSED");
    }
    expect(summaries[0]?.first).toHaveLength(5);
    // The listening line names the first few too, and the count (it was 250 KB for 10k entries).
    const listening = started.logs.find((l) => l.msg === "radixgate listening") as
      | (LogLine & { workers: string[]; workers_total: number })
      | undefined;
    expect(listening?.workers).toHaveLength(20);
    expect(listening?.workers_total).toBe(200);
  });
});
