/**
 * State oversize: what one huge entry written to the ops stream by someone without the state
 * secret costs a replica (issue 20 item 2: "a 50 MB insert op cost 200-270 MB RSS per replica and
 * a 538 ms stall"). A replica (in this process) follows a real redis-server; another process
 * (redis-cli) appends one insert op whose text is --mb MiB; a probe asks the replica's GET /health
 * one request at a time for 3 s and the process's RSS is sampled between probes. Each run is a
 * fresh process. The replica drops
 * the entry unread (radixgate_state_ops_rejected_total{reason="oversize"}); what remains is the
 * cost of receiving it.
 *
 *   npm run bench:state-oversize                 50 MiB, 5 runs
 *   npm run bench:state-oversize -- --mb 8 --runs 3
 *
 * Prints a table and writes bench/results/state-oversize.json.
 */

import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import os from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { startLocalRedis } from "../sim/redis-server.js";
import { startSimWorker } from "../sim/worker.js";
import { configWith } from "../src/config.js";
import { createLogger } from "../src/logger.js";
import { startRouter } from "../src/server.js";
import { commandLine, runIfEntryPoint } from "./lib/entry.js";
import { summarizeMs } from "./lib/latency.js";
import { printTable } from "./lib/stats.js";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const RESULTS = join(ROOT, "bench", "results", "state-oversize.json");
const PROBE_MS = 3000;

interface RunResult {
  healthP99Ms: number;
  healthMaxMs: number;
  rssGrowthMb: number;
  indexedChars: number;
  rejected: number;
}

async function runOnce(mb: number): Promise<RunResult> {
  const redis = await startLocalRedis();
  const worker = await startSimWorker({ id: "w", timeScale: 0 });
  const router = await startRouter(
    configWith({
      host: "127.0.0.1",
      port: 0,
      workerUrls: [worker.url],
      stateUrl: redis.url,
      stateSecret: randomBytes(24).toString("hex"),
      stateKeyPrefix: "oversize",
      healthCheckIntervalSecs: 0,
      enginePollIntervalSecs: 0,
    }),
    { logger: createLogger({ level: "silent" }) },
  );
  try {
    const id = router.context.registry.list()[0]!.id;
    const rss0 = process.memoryUsage().rss;
    let maxRss = rss0;
    const samples: number[] = [];
    const until = Date.now() + PROBE_MS;
    const probe = (async () => {
      while (Date.now() < until) {
        const t = performance.now();
        await (await fetch(`${router.url}/health`)).text();
        samples.push(performance.now() - t);
        maxRss = Math.max(maxRss, process.memoryUsage().rss);
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    })();
    // The writer is another process: this one pays only for receiving the entry.
    await appendWithRedisCli(redis.port, id, mb);
    await probe;
    const metrics = await (await fetch(`${router.url}/metrics`)).text();
    const rejected = /^radixgate_state_ops_rejected_total\{reason="oversize"\} (\d+)$/m.exec(
      metrics,
    )?.[1];
    const s = summarizeMs(samples);
    return {
      healthP99Ms: s.p99,
      healthMaxMs: s.max,
      rssGrowthMb: (maxRss - rss0) / 1e6,
      indexedChars: router.context.index.size(id),
      rejected: Number(rejected ?? 0),
    };
  } finally {
    await router.stop(100);
    await worker.close();
    await redis.stop();
  }
}

/** `XADD oversize:ops * r evil k i w <id> x <mb MiB of "z">` through redis-cli (-x: from stdin). */
function appendWithRedisCli(port: number, workerId: string, mb: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const cli = spawn(
      "redis-cli",
      [
        "-p",
        String(port),
        "-x",
        "XADD",
        "oversize:ops",
        "*",
        "r",
        "evil",
        "k",
        "i",
        "w",
        workerId,
        "x",
      ],
      { stdio: ["pipe", "ignore", "inherit"] },
    );
    cli.on("error", reject);
    cli.on("exit", () => resolve());
    cli.stdin.end(Buffer.alloc(mb * 1024 * 1024, "z"));
  });
}

/** One run in a fresh process, so that each run's RSS starts from the same place. */
function runInChild(mb: number): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [...process.execArgv, fileURLToPath(import.meta.url), "--child", "--mb", String(mb)],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    let out = "";
    child.stdout.on("data", (d: Buffer) => {
      out += d.toString();
    });
    child.on("error", reject);
    child.on("exit", (code) => {
      try {
        resolve(JSON.parse(out.trim().split("\n").at(-1) ?? "") as RunResult);
      } catch {
        reject(new Error(`run failed (exit ${code}): ${out.slice(-300)}`));
      }
    });
  });
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      mb: { type: "string", default: "50" },
      runs: { type: "string", default: "5" },
      child: { type: "boolean", default: false },
    },
  });
  const mb = Number(values.mb);
  if (values.child) {
    console.log(JSON.stringify(await runOnce(mb)));
    process.exit(0);
  }
  const runs = Number(values.runs);
  const results: RunResult[] = [];
  for (let i = 0; i < runs; i++) results.push(await runInChild(mb));
  printTable(
    ["run", "/health p99 ms", "/health max ms", "RSS growth MB", "indexed chars", "rejected"],
    results.map((r, i) => [
      i + 1,
      r.healthP99Ms.toFixed(0),
      r.healthMaxMs.toFixed(0),
      r.rssGrowthMb.toFixed(0),
      r.indexedChars,
      r.rejected,
    ]),
  );
  mkdirSync(dirname(RESULTS), { recursive: true });
  writeFileSync(
    RESULTS,
    JSON.stringify(
      {
        command: commandLine("bench:state-oversize"),
        date: new Date().toISOString(),
        cpus: os.cpus().length,
        mb,
        results,
      },
      null,
      2,
    ),
  );
}

runIfEntryPoint(import.meta.url, main);
