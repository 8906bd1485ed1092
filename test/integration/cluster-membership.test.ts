import { request } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import { type Cluster, childPids, listening, startCluster } from "../helpers/cluster.js";
import { waitFor } from "../helpers/router.js";

/**
 * radixgate-cluster without Redis: a worker added or removed through the admin API on one
 * connection (so one process) reaches every process, and a process restarted later gets it from
 * the primary. Fresh connections (agent: false) alternate between the two processes, so two
 * requests in a row ask both.
 */

/** One HTTP request on a connection of its own: status, body and headers. */
function call(
  port: number,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; text: string; worker: string }> {
  const data = body === undefined ? "" : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: "127.0.0.1",
        port,
        path,
        method,
        agent: false,
        timeout: 10_000,
        headers: data
          ? { "content-type": "application/json", "content-length": Buffer.byteLength(data) }
          : {},
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (d) => (text += d));
        res.on("end", () =>
          resolve({
            status: res.statusCode ?? 0,
            text,
            worker: String(res.headers["x-sim-worker-id"] ?? ""),
          }),
        );
      },
    );
    req.on("timeout", () => req.destroy(new Error("request timed out")));
    req.on("error", reject);
    req.end(data);
  });
}

/** The worker URLs each of the next two connections' processes lists. */
async function listedByBoth(port: number): Promise<string[][]> {
  const lists: string[][] = [];
  for (let i = 0; i < 2; i++) {
    const { text } = await call(port, "GET", "/list_workers");
    lists.push(((JSON.parse(text) as { urls: string[] }).urls ?? []).slice().sort());
  }
  return lists;
}

/** This process's routing decisions so far (its own /metrics). */
async function decisions(port: number): Promise<number> {
  const { text } = await call(port, "GET", "/metrics");
  let sum = 0;
  for (const line of text.split("\n")) {
    if (line.startsWith("radixgate_routing_decisions_total{")) sum += Number(line.split(" ").pop());
  }
  return sum;
}

describe("radixgate-cluster: admin API membership reaches every process without Redis", () => {
  let sims: SimWorker[];
  let cluster: Cluster | undefined;

  beforeAll(async () => {
    sims = await Promise.all([1, 2].map((i) => startSimWorker({ id: `s${i}`, timeScale: 0 })));
  });

  afterAll(async () => {
    if (cluster !== undefined && cluster.child.exitCode === null) {
      cluster.child.kill("SIGTERM");
      await cluster.exited;
    }
    await Promise.allSettled(sims.map((s) => s.close()));
  });

  it("a worker added and one removed on one connection are listed and routed by both processes, and by one restarted later", async () => {
    const [s1, s2] = sims as [SimWorker, SimWorker];
    cluster = await startCluster([s1.url]);
    const { port, child, log, errors } = cluster;

    // Added through one process: every process lists it.
    const added = await call(port, "POST", "/workers", { url: s2.url });
    expect(added.status, added.text).toBe(202);
    const both = [s1.url, s2.url].sort();
    await waitFor(
      async () => JSON.stringify(await listedByBoth(port)) === JSON.stringify([both, both]),
      10_000,
      "both processes listing the added worker",
    );
    // Removed through one process (the one of the command line, SGLang's route): gone everywhere.
    const removed = await call(port, "POST", `/remove_worker?url=${encodeURIComponent(s1.url)}`);
    expect(removed.status, removed.text).toBe(200);
    await waitFor(
      async () => JSON.stringify(await listedByBoth(port)) === JSON.stringify([[s2.url], [s2.url]]),
      10_000,
      "both processes without the removed worker",
    );
    // Both processes route to the added worker only.
    const before = [await decisions(port), await decisions(port)];
    for (let i = 0; i < 4; i++) {
      const chat = await call(port, "POST", "/v1/chat/completions", {
        model: "m",
        messages: [{ role: "user", content: `question ${i}` }],
        max_tokens: 2,
      });
      expect(chat.status, chat.text).toBe(200);
      expect(chat.worker).toBe("s2");
    }
    const after = [await decisions(port), await decisions(port)];
    const routed = [after[0]! - before[0]!, after[1]! - before[1]!];
    expect(routed[0]).toBeGreaterThan(0);
    expect(routed[1]).toBeGreaterThan(0);
    // Each request is one decision: a total of 4 over the two reads holds only if both processes
    // took some of the 4 (two reads of one process that took them all would add up to 8).
    expect(routed[0]! + routed[1]!).toBe(4);

    // A process restarted later gets the admin-made membership from the primary.
    const [victim] = childPids(child.pid!);
    process.kill(victim!, "SIGKILL");
    await waitFor(
      () => listening(log()).length >= 3,
      30_000,
      () => `a restart\n${errors()}`,
    );
    await waitFor(
      async () => JSON.stringify(await listedByBoth(port)) === JSON.stringify([[s2.url], [s2.url]]),
      10_000,
      "the restarted process with the admin-made membership",
    );
    for (let i = 0; i < 2; i++) {
      const chat = await call(port, "POST", "/v1/chat/completions", {
        model: "m",
        messages: [{ role: "user", content: `after the restart ${i}` }],
        max_tokens: 2,
      });
      expect(chat.status, chat.text).toBe(200);
      expect(chat.worker).toBe("s2");
    }
  }, 90_000);
});
