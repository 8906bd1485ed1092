/**
 * Issue 10 item 6: a worker that accepts requests and never answers, while its /health still
 * says 200, is ejected like one answering 5xx: first-byte timeouts count against its breaker.
 */
import { describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import { defaultConfig, flagValues } from "../../src/config.js";
import { waitFor } from "../helpers/router.js";
import { chat, metric, sseData, startedPerTest, startLoggedRouter, workerId } from "./support.js";

describe("outlier ejection: silent workers", () => {
  const started = startedPerTest();

  async function fleet(): Promise<[SimWorker, SimWorker]> {
    started.sims = await Promise.all([
      startSimWorker({ id: "silent", timeScale: 0, faults: { hang: true } }),
      startSimWorker({ id: "fine", timeScale: 0 }),
    ]);
    return started.sims as [SimWorker, SimWorker];
  }

  it("a worker that never answers while /health says 200 is ejected after --cb-failure-threshold first-byte timeouts, like one answering 5xx", async () => {
    const [silent, fine] = await fleet();
    const logged = await startLoggedRouter({
      workerUrls: [silent.url, fine.url],
      policy: "round_robin",
      cbFailureThreshold: 2,
      cbTimeoutSecs: 60,
      // Short for the silent worker; the fine one answers at once (timeScale 0).
      firstByteTimeoutSecs: 0.5,
      retryMaxAttempts: 1,
    });
    started.router = logged.router;
    const { registry, health } = logged.router.context;
    const worker = registry.get(silent.url)!;

    // Round robin alternates: silent (504), fine, silent (504), fine.
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) {
      const res = await chat(logged.router.url, `request ${i}`);
      statuses.push(res.status);
      await res.arrayBuffer();
    }
    expect(statuses).toEqual([504, 200, 504, 200]);
    expect(worker.breaker.state).toBe("open");

    // Its health check still passes; it is out because of what it did to real traffic.
    await health.checkAll();
    expect(worker.healthy).toBe(true);
    expect(worker.available).toBe(false);
    for (let i = 0; i < 4; i++) {
      const res = await chat(logged.router.url, `after ejection ${i}`);
      expect(res.status).toBe(200);
      await res.arrayBuffer();
    }
    expect(fine.stats().completed).toBe(6);
    expect(
      await metric(logged.router.url, "radixgate_upstream_errors_total", {
        worker: workerId(silent.url),
        kind: "timeout",
      }),
    ).toBe(2);
  });

  it("a streaming request to a silent worker gives up after --stream-first-byte-timeout-secs and is retried on another worker", async () => {
    const [silent, fine] = await fleet();
    const logged = await startLoggedRouter({
      workerUrls: [silent.url, fine.url],
      policy: "round_robin",
      firstByteTimeoutSecs: 30,
      streamFirstByteTimeoutSecs: 0.5,
    });
    started.router = logged.router;

    const startedAt = Date.now();
    const res = await chat(logged.router.url, "stream please", { stream: true });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-radixgate-worker")).toBe(
      logged.router.context.registry.get(fine.url)!.id,
    );
    expect(sseData(await res.text()).at(-1)).toBe("[DONE]");
    // Well before the 30 s non-streaming limit.
    expect(Date.now() - startedAt).toBeLessThan(10_000);
    expect(logged.accessLog().at(-1)).toMatchObject({ status: 200, attempts: 2 });
    await waitFor(() => silent.stats().hanging === 0, 2000, "the silent worker to see the abort");
    expect(logged.router.context.registry.get(silent.url)!.breaker.consecutiveFailures).toBe(1);
  });

  it("a non-streaming request is not retried after a first-byte timeout: it may still be generating", async () => {
    const [silent, fine] = await fleet();
    const logged = await startLoggedRouter({
      workerUrls: [silent.url, fine.url],
      policy: "round_robin",
      firstByteTimeoutSecs: 0.2,
    });
    started.router = logged.router;
    const res = await chat(logged.router.url, "not streamed");
    expect(res.status).toBe(504);
    const body = (await res.json()) as { error: { message: string } };
    expect(body.error.message).toContain("--first-byte-timeout-secs (0.2 s)");
    expect(fine.stats().requests).toBe(0);
  });

  it("the default first-byte limits are bounded well below 10 minutes, the streaming one below the other", () => {
    const config = flagValues(defaultConfig()) as {
      firstByteTimeoutSecs: number;
      streamFirstByteTimeoutSecs: number;
      idleTimeoutSecs: number;
    };
    expect(config.firstByteTimeoutSecs).toBe(300);
    expect(config.streamFirstByteTimeoutSecs).toBe(60);
    expect(config.streamFirstByteTimeoutSecs).toBeLessThan(config.idleTimeoutSecs);
  });
});
