import { request } from "node:http";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import { type Cluster, childPids, listening, startCluster } from "../helpers/cluster.js";
import { waitFor } from "../helpers/router.js";

/**
 * radixgate-cluster's processes share routing decisions over the local channel (issue 23 item 4),
 * no Redis. Which process takes a request: node:cluster's primary hands each new connection to
 * the next process in turn, so requests each on a fresh connection (agent: false) alternate
 * between the two processes; the per-process /metrics counters confirm both routed.
 */

interface Answer {
  status: number;
  worker: string;
  route: string;
  match: number;
}

/** One chat completion on a connection of its own. */
function chat(port: number, text: string): Promise<Answer> {
  const body = JSON.stringify({
    model: "m",
    messages: [{ role: "user", content: text }],
    max_tokens: 2,
  });
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: "127.0.0.1",
        port,
        path: "/v1/chat/completions",
        method: "POST",
        agent: false,
        headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) },
        timeout: 10_000,
      },
      (res) => {
        res.resume();
        res.on("end", () => {
          const route = String(res.headers["x-radixgate-route"] ?? "");
          resolve({
            status: res.statusCode ?? 0,
            worker: String(res.headers["x-sim-worker-id"] ?? ""),
            route,
            match: Number(/match=(\d\.\d\d)/.exec(route)?.[1] ?? Number.NaN),
          });
        });
      },
    );
    req.on("timeout", () => req.destroy(new Error("request timed out")));
    req.on("error", reject);
    req.end(body);
  });
}

/** GET on a connection of its own: the text of the answer. */
function get(port: number, path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, path, agent: false, timeout: 10_000 }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (d) => (text += d));
      res.on("end", () => resolve(text));
    });
    req.on("timeout", () => req.destroy(new Error("request timed out")));
    req.on("error", reject);
    req.end();
  });
}

/** This process's routing decisions so far (its own /metrics). */
async function decisions(port: number): Promise<number> {
  const text = await get(port, "/metrics");
  let sum = 0;
  for (const line of text.split("\n")) {
    if (line.startsWith("radixgate_routing_decisions_total{")) sum += Number(line.split(" ").pop());
  }
  return sum;
}

/** A system prompt long enough to be a prefix worth sharing (several claim blocks). */
const PREFIX = `You are the assistant of tenant ${"acme ".repeat(10)}. ${"Follow the house rules carefully. ".repeat(30)}`;

describe("radixgate-cluster: processes share routing decisions without Redis", () => {
  let sims: SimWorker[];
  let cluster: Cluster | undefined;

  beforeAll(async () => {
    sims = await Promise.all([1, 2].map((i) => startSimWorker({ id: `s${i}`, timeScale: 0 })));
  });

  afterEach(async () => {
    if (cluster !== undefined && cluster.child.exitCode === null) {
      cluster.child.kill("SIGTERM");
      await cluster.exited;
    }
    cluster = undefined;
  });

  afterAll(async () => {
    await Promise.allSettled(sims.map((s) => s.close()));
  });

  it("a prefix routed by one process is known to the other: both send it to the same worker", async () => {
    cluster = await startCluster(sims.map((s) => s.url));
    const { port } = cluster;
    // One request elsewhere first, so the two processes' load rotations differ: without sharing,
    // the process that did not see the prefix would send it to the other worker.
    expect((await chat(port, "an unrelated warm-up question")).status).toBe(200);
    const answers: Answer[] = [];
    for (let i = 0; i < 6; i++) answers.push(await chat(port, `${PREFIX} question ${i}?`));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200, 200]);
    expect(new Set(answers.map((a) => a.worker)).size).toBe(1);
    // From the second on, whichever process took it found the prefix in its own index.
    for (const a of answers.slice(1)) expect(a.match, a.route).toBeGreaterThan(0.8);
    // Both processes routed some of them (fresh connections alternate between processes).
    const counts = [await decisions(port), await decisions(port)];
    expect(counts[0]).toBeGreaterThan(0);
    expect(counts[1]).toBeGreaterThan(0);
    expect(counts[0]! + counts[1]!).toBe(7);
  }, 60_000);

  it("two processes routing the same new prefix at once agree on one worker", async () => {
    // cache_aware: a prefix nobody holds goes to the least loaded worker, ties taking turns, so
    // two processes on their own would each pick by their own rotation (prefix_cost's hash
    // tie-break would make them agree by itself while the loads are equal).
    cluster = await startCluster(
      sims.map((s) => s.url),
      [],
      ["--policy", "cache_aware"],
    );
    const { port } = cluster;
    // As above: one process's rotation moves ahead, so on its own each would pick another worker.
    expect((await chat(port, "an unrelated warm-up question")).status).toBe(200);
    for (let round = 0; round < 3; round++) {
      const prefix = `round ${round}: ${PREFIX}`;
      // Two connections at once: one to each process; neither has seen the prefix.
      const [a, b] = await Promise.all([
        chat(port, `${prefix} first?`),
        chat(port, `${prefix} second?`),
      ]);
      expect([a!.status, b!.status]).toEqual([200, 200]);
      expect(a!.worker, `${a!.route} / ${b!.route}`).toBe(b!.worker);
    }
    const counts = [await decisions(port), await decisions(port)];
    expect(counts[0]! + counts[1]!).toBe(7);
    expect(Math.min(counts[0]!, counts[1]!)).toBeGreaterThan(0);
  }, 60_000);

  it("a process that dies is started again, learns what was decided, and its sibling carries on", async () => {
    cluster = await startCluster(sims.map((s) => s.url));
    const { port, child } = cluster;
    const first = await chat(port, `${PREFIX} before the crash?`);
    expect(first.status).toBe(200);
    const [victim] = childPids(child.pid!);
    process.kill(victim!, "SIGKILL");
    // Once the primary has seen the exit (a connection handed to the dying process at that very
    // instant is lost with it), the sibling goes on serving while another process starts.
    await waitFor(() => /exited \(SIGKILL\); starting another/.test(cluster!.errors()), 10_000);
    const during = await chat(port, `${PREFIX} during the restart?`);
    expect(during.status).toBe(200);
    expect(during.worker).toBe(first.worker);
    const log = cluster.log;
    await waitFor(() => listening(log()).length >= 3, 30_000, "a process started again");
    // Whichever process takes each request (the new one included) knows the prefix.
    for (let i = 0; i < 4; i++) {
      const after = await chat(port, `${PREFIX} after the restart ${i}?`);
      expect(after.status).toBe(200);
      expect(after.worker).toBe(first.worker);
      expect(after.match, after.route).toBeGreaterThan(0.8);
    }
  }, 60_000);

  it("SIGTERM stops every process gracefully and the primary exits 0", async () => {
    cluster = await startCluster(sims.map((s) => s.url));
    expect((await chat(cluster.port, `${PREFIX} one?`)).status).toBe(200);
    cluster.child.kill("SIGTERM");
    expect(await cluster.exited).toBe(0);
    const stopped = cluster
      .log()
      .split("\n")
      .filter((l) => l.includes('"msg":"stopped"'));
    expect(stopped).toHaveLength(2);
  }, 60_000);
});
