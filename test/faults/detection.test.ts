import { describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import type { RunningRouter } from "../../src/server.js";
import { startTestRouter, waitFor } from "../helpers/router.js";
import { chat, complete, deadUrl, errorCode, metric, startedPerTest, workerId } from "./support.js";

type WorkerJson = { id: string; url: string; healthy: boolean; circuit: string };

async function listed(router: RunningRouter, url: string): Promise<WorkerJson> {
  const { workers } = (await (await fetch(`${router.url}/workers`)).json()) as {
    workers: WorkerJson[];
  };
  const found = workers.find((w) => w.url === url);
  if (!found) throw new Error(`${url} is not listed`);
  return found;
}

describe("failure detection: active health checks", () => {
  const started = startedPerTest();

  it("marks a worker unhealthy after exactly healthFailureThreshold failed checks and healthy after healthSuccessThreshold passes", async () => {
    started.sims = [await startSimWorker({ id: "h", timeScale: 0 })];
    // No timer: the test drives every check itself.
    started.router = await startTestRouter({
      workerUrls: [started.sims[0]!.url],
      healthFailureThreshold: 3,
      healthSuccessThreshold: 2,
    });
    const worker = started.router.context.registry.list()[0]!;
    // The check made at start-up has passed.
    await waitFor(() => worker.healthSuccesses === 1, 2000, "the start-up check");

    started.sims[0]!.setFaults({ unhealthy: true });
    await started.router.context.health.checkAll();
    await started.router.context.health.checkAll();
    expect(worker.healthy).toBe(true);
    await started.router.context.health.checkAll();
    expect(worker.healthy).toBe(false);

    started.sims[0]!.setFaults({ unhealthy: false });
    await started.router.context.health.checkAll();
    expect(worker.healthy).toBe(false);
    await started.router.context.health.checkAll();
    expect(worker.healthy).toBe(true);
  });

  it("one passed check in between restarts the failure count", async () => {
    started.sims = [await startSimWorker({ id: "h2", timeScale: 0 })];
    started.router = await startTestRouter({
      workerUrls: [started.sims[0]!.url],
      healthFailureThreshold: 2,
    });
    const worker = started.router.context.registry.list()[0]!;
    await waitFor(() => worker.healthSuccesses === 1, 2000, "the start-up check");
    for (const unhealthy of [true, false, true, false, true]) {
      started.sims[0]!.setFaults({ unhealthy });
      await started.router.context.health.checkAll();
      expect(worker.healthy).toBe(true);
    }
  });

  it("an unhealthy worker stays listed (healthy:false), keeps its tree and gets no traffic", async () => {
    started.sims = await Promise.all([
      startSimWorker({ id: "sick", timeScale: 0 }),
      startSimWorker({ id: "fine", timeScale: 0 }),
    ]);
    const [sick, fine] = started.sims as [SimWorker, SimWorker];
    started.router = await startTestRouter({
      workerUrls: [sick.url, fine.url],
      healthCheckIntervalSecs: 0.05,
      healthFailureThreshold: 2,
      healthSuccessThreshold: 2,
    });
    // Give the sick worker a tree first (distinct prompts on an idle fleet: load ties rotate).
    for (const prompt of ["alpha", "bravo", "charlie", "delta"])
      expect((await complete(started.router.url, prompt)).status).toBe(200);
    expect(sick.stats().requests).toBe(2);
    const worker = started.router.context.registry.get(sick.url)!;
    const treeChars = started.router.context.index.size(worker.id);
    expect(treeChars).toBeGreaterThan(0);

    sick.setFaults({ unhealthy: true });
    await waitFor(
      async () => !(await listed(started.router!, sick.url)).healthy,
      3000,
      "healthy:false",
    );
    expect(
      await metric(started.router.url, "radixgate_worker_healthy", { worker: workerId(sick.url) }),
    ).toBe(0);
    expect(started.router.context.registry.size).toBe(2);
    expect(started.router.context.index.size(worker.id)).toBe(treeChars);

    const before = sick.stats().requests;
    for (let i = 0; i < 6; i++) {
      const res = await chat(started.router.url, `while sick ${i}`);
      expect(res.status).toBe(200);
      await res.arrayBuffer();
    }
    expect(sick.stats().requests).toBe(before);

    sick.setFaults({ unhealthy: false });
    await waitFor(
      async () => (await listed(started.router!, sick.url)).healthy,
      3000,
      "healthy again",
    );
    expect(started.router.context.index.size(worker.id)).toBe(treeChars);
  });
});

describe("failure detection: passive circuit breaker", () => {
  const started = startedPerTest();

  it("opens after cbFailureThreshold consecutive 5xx, half-opens after cbTimeoutSecs, closes after 2 successes (GET /workers and metrics)", async () => {
    started.sims = [await startSimWorker({ id: "cb", timeScale: 0, faults: { status: 500 } })];
    const sim = started.sims[0]!;
    started.router = await startTestRouter({
      workerUrls: [sim.url],
      cbFailureThreshold: 3,
      cbTimeoutSecs: 0.5,
      retryMaxAttempts: 1,
    });
    const circuit = async () => (await listed(started.router!, sim.url)).circuit;
    const gauge = () =>
      metric(started.router!.url, "radixgate_worker_circuit_state", { worker: workerId(sim.url) });

    for (let i = 0; i < 2; i++)
      expect((await chat(started.router.url, `fail ${i}`)).status).toBe(500);
    expect(await circuit()).toBe("closed");
    expect((await chat(started.router.url, "fail 3")).status).toBe(500);

    // Open: the only worker is not tried at all.
    const refused = await chat(started.router.url, "while open");
    expect(refused.status).toBe(503);
    expect(await errorCode(refused)).toBe("no_workers_available");
    expect(sim.stats().requests).toBe(3);
    expect(await circuit()).toBe("open");
    expect(await gauge()).toBe(2);

    sim.setFaults({ status: null });
    await waitFor(async () => (await circuit()) === "half_open", 3000, "half-open");
    expect(await gauge()).toBe(1);
    expect((await chat(started.router.url, "trial 1")).status).toBe(200);
    expect(await circuit()).toBe("half_open");
    expect((await chat(started.router.url, "trial 2")).status).toBe(200);
    expect(await circuit()).toBe("closed");
    expect(await gauge()).toBe(0);
  });

  it("a failed trial while half-open opens the circuit again", async () => {
    started.sims = [await startSimWorker({ id: "cb2", timeScale: 0, faults: { status: 502 } })];
    const sim = started.sims[0]!;
    started.router = await startTestRouter({
      workerUrls: [sim.url],
      cbFailureThreshold: 2,
      cbTimeoutSecs: 2,
      retryMaxAttempts: 1,
    });
    const worker = started.router.context.registry.list()[0]!;
    for (let i = 0; i < 2; i++) await (await chat(started.router.url, `fail ${i}`)).arrayBuffer();
    expect(worker.breaker.state).toBe("open");
    await waitFor(() => worker.breaker.state === "half_open", 10_000, "half-open");
    const trial = await chat(started.router.url, "trial");
    expect(trial.status).toBe(502);
    await trial.arrayBuffer();
    expect(worker.breaker.state).toBe("open");
  });

  it("never opens on 4xx: a worker answering 400 to bad requests keeps its circuit closed", async () => {
    started.sims = [await startSimWorker({ id: "cb400", timeScale: 0, faults: { status: 400 } })];
    const sim = started.sims[0]!;
    started.router = await startTestRouter({
      workerUrls: [sim.url],
      cbFailureThreshold: 2,
      cbTimeoutSecs: 0.2,
    });
    for (let i = 0; i < 8; i++) {
      const res = await chat(started.router.url, `bad ${i}`);
      expect(res.status).toBe(400);
      await res.arrayBuffer();
    }
    const worker = started.router.context.registry.list()[0]!;
    expect(worker.breaker.state).toBe("closed");
    expect(worker.breaker.consecutiveFailures).toBe(0);
    expect((await listed(started.router, sim.url)).circuit).toBe("closed");
    expect(sim.stats().requests).toBe(8);
  });

  it("connection errors count as failures and open the circuit", async () => {
    const url = await deadUrl();
    started.router = await startTestRouter({
      workerUrls: [url],
      cbFailureThreshold: 3,
      cbTimeoutSecs: 30,
      retryMaxAttempts: 1,
    });
    for (let i = 0; i < 3; i++) {
      const res = await chat(started.router.url, `refused ${i}`);
      expect(res.status).toBe(502);
      expect(await errorCode(res)).toBe("upstream_error");
    }
    expect((await listed(started.router, url)).circuit).toBe("open");
    expect(
      await metric(started.router.url, "radixgate_upstream_errors_total", {
        worker: workerId(url),
        kind: "connect",
      }),
    ).toBe(3);
  });

  it("timeouts count as failures and open the circuit", async () => {
    started.sims = [await startSimWorker({ id: "cbhang", timeScale: 0, faults: { hang: true } })];
    started.router = await startTestRouter({
      workerUrls: [started.sims[0]!.url],
      cbFailureThreshold: 2,
      cbTimeoutSecs: 30,
      firstByteTimeoutSecs: 0.1,
    });
    for (let i = 0; i < 2; i++) {
      const res = await chat(started.router.url, `hang ${i}`);
      expect(res.status).toBe(504);
      expect(await errorCode(res)).toBe("upstream_timeout");
    }
    expect((await listed(started.router, started.sims[0]!.url)).circuit).toBe("open");
  });
});
