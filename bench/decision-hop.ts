/**
 * What deferring to the leader costs one request: two replicas sharing a real redis-server, a
 * client sending streamed chat requests one at a time to the replica that is not the leader, and
 * the time to the first streamed chunk, with the replicas deciding apart (claims) and with the
 * leader deciding (--state-advertise-url, --state-relay decisions), in alternating rounds on the
 * same simulated engines (no prefill time: the router's own time is what is left). One process
 * holds the replicas, the engines and the client, so the figure is the hop's own cost on an idle
 * machine; under load every hop also waits for a core.
 *
 *   npm run bench:decision-hop
 *   npm run bench:decision-hop -- --rounds 6 --requests 400
 *
 * Prints each round's mean, p50 and p99 time to the first chunk per mode, and the median of the
 * per-round ratios (decisions ÷ claims); writes bench/results/decision-hop.json.
 */
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { findRedisServer, startLocalRedis } from "../sim/redis-server.js";
import { startSimWorker } from "../sim/worker.js";
import { configWith } from "../src/config.js";
import { createLogger } from "../src/logger.js";
import { type RunningRouter, startRouter } from "../src/server.js";
import { commandLine, machineSummary, runIfEntryPoint, writeResults } from "./lib/entry.js";
import { fmt } from "./lib/latency.js";
import { printTable } from "./lib/stats.js";

const RESULTS = join(import.meta.dirname, "results", "decision-hop.json");
const MODES = ["claims", "decisions"] as const;
type Mode = (typeof MODES)[number];
/** Requests of each round not counted: connections, JIT, the leader's URL reaching the follower. */
const WARM_UP = 50;

interface Round {
  mode: Mode;
  meanMs: number;
  p50Ms: number;
  p99Ms: number;
}

async function round(
  mode: Mode,
  workerUrls: string[],
  redisUrl: string,
  requests: number,
): Promise<Round> {
  const logger = createLogger({ level: "silent" });
  const settings = {
    host: "127.0.0.1",
    port: 0,
    logLevel: "silent" as const,
    healthCheckIntervalSecs: 0,
    enginePollIntervalSecs: 0,
    workerUrls,
    stateUrl: redisUrl,
    stateSecret: randomBytes(16).toString("hex"),
    stateKeyPrefix: `hop${randomBytes(4).toString("hex")}`,
  };
  const routers: RunningRouter[] = [];
  try {
    const leader = await startRouter(configWith(settings), { logger });
    routers.push(leader);
    const follower = await startRouter(
      configWith({ ...settings, stateSecret: settings.stateSecret }),
      {
        logger,
      },
    );
    routers.push(follower);
    if (mode === "decisions") {
      // Listening on port 0: each advertises the URL it got.
      leader.context.sharedState?.advertise(leader.url);
      follower.context.sharedState?.advertise(follower.url);
      const deadline = Date.now() + 5000;
      while (follower.context.replication?.relayTarget() !== leader.url) {
        if (Date.now() > deadline) throw new Error("the follower never saw the leader's URL");
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    }
    const times: number[] = [];
    const system = "You are a helpful assistant who answers briefly. ".repeat(40);
    for (let i = 0; i < requests + WARM_UP; i++) {
      const started = performance.now();
      const res = await fetch(`${follower.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          model: "m",
          messages: [
            { role: "system", content: system },
            { role: "user", content: `question ${i % 20}` },
          ],
          max_tokens: 2,
          stream: true,
        }),
      });
      const reader = (res.body as ReadableStream<Uint8Array>).getReader();
      await reader.read();
      if (i >= WARM_UP) times.push(performance.now() - started);
      while (!(await reader.read()).done) {}
    }
    times.sort((a, b) => a - b);
    const at = (q: number) => times[Math.min(times.length - 1, Math.floor(times.length * q))] ?? 0;
    return {
      mode,
      meanMs: times.reduce((sum, t) => sum + t, 0) / times.length,
      p50Ms: at(0.5),
      p99Ms: at(0.99),
    };
  } finally {
    for (const r of routers.reverse()) await r.stop(100);
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      rounds: { type: "string", default: "4" },
      requests: { type: "string", default: "300" },
    },
  });
  const rounds = Number(values.rounds);
  const requests = Number(values.requests);
  if (!Number.isInteger(rounds) || rounds < 1) throw new Error(`--rounds: ${values.rounds}`);
  if (!Number.isInteger(requests) || requests < 10)
    throw new Error(`--requests: ${values.requests}`);
  if (findRedisServer() === undefined) {
    console.error("bench:decision-hop needs redis-server: apt-get install -y redis-server");
    process.exit(2);
  }
  const redis = await startLocalRedis();
  const sims = await Promise.all(["h0", "h1"].map((id) => startSimWorker({ id, timeScale: 0 })));
  const results: Round[] = [];
  try {
    for (let r = 0; r < rounds; r++) {
      // Alternating which goes first, so a drift of the machine falls on both.
      const order = r % 2 === 0 ? MODES : ([...MODES].reverse() as Mode[]);
      for (const mode of order)
        results.push(
          await round(
            mode,
            sims.map((s) => s.url),
            redis.url,
            requests,
          ),
        );
    }
  } finally {
    await Promise.all(sims.map((s) => s.close()));
    await redis.stop();
  }
  printTable(
    ["round", "mode", "first chunk mean ms", "p50 ms", "p99 ms"],
    results.map((x, i) => [
      Math.floor(i / 2) + 1,
      x.mode,
      fmt(x.meanMs, 2),
      fmt(x.p50Ms, 2),
      fmt(x.p99Ms, 2),
    ]),
  );
  const ratios: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const pair = results.slice(r * 2, r * 2 + 2);
    const of = (mode: Mode) => pair.find((x) => x.mode === mode)?.meanMs ?? Number.NaN;
    ratios.push(of("decisions") / of("claims"));
  }
  ratios.sort((a, b) => a - b);
  const median = ratios[Math.floor(ratios.length / 2)] ?? Number.NaN;
  const added = results
    .filter((x) => x.mode === "decisions")
    .map((x, i) => x.meanMs - (results.filter((y) => y.mode === "claims")[i]?.meanMs ?? 0));
  console.log(
    `\nmedian per-round ratio, decisions ÷ claims (mean first chunk): ${fmt(median, 2)}; added per round ${added.map((a) => fmt(a, 2)).join(", ")} ms`,
  );
  writeResults(RESULTS, {
    command: commandLine("bench:decision-hop"),
    date: new Date().toISOString(),
    machine: machineSummary(),
    rounds: results,
    medianRatio: median,
  });
}

runIfEntryPoint(import.meta.url, main);
