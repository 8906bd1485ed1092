/**
 * Memory per open stream (issue 23 item 5): what the router holds for each streamed answer in
 * flight, after garbage collection, so the figure is what a stream keeps alive and not garbage
 * the collector has not reached yet (bench:stream's RSS per stream includes that). Simulated
 * engines send one chunk a second, so N streams stay open while the router is measured:
 * idle (after a warm-up), then with N streams open and every one past its first chunk. With
 * --base REF the same runs against that ref's router, alternated in rounds.
 *
 *   npm run bench:stream-memory                       500 streams, 2 rounds
 *   npm run bench:stream-memory -- --base main --streams 500 --rounds 3
 *   npm run bench:stream-memory -- --streams 200 --rounds 1 --snapshots /tmp/snaps   heap snapshots
 *
 * Prints heap + external and RSS per open stream for each build; writes
 * bench/results/stream-memory.json.
 */
import { fork } from "node:child_process";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { Agent, request } from "node:http";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { buildRef } from "./lib/build-ref.js";
import { commandLine, runIfEntryPoint } from "./lib/entry.js";
import { childFleetHost } from "./lib/fleet.js";
import type { MemoryChildReply, MemoryChildRequest } from "./lib/memory-router-child.js";
import { TSX_EXEC_ARGV } from "./lib/tsx-exec-argv.js";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const RESULTS = join(ROOT, "bench", "results", "stream-memory.json");
const CHILD = fileURLToPath(new URL("./lib/memory-router-child.ts", import.meta.url));
const MODEL = "meta-llama/Llama-3.1-8B-Instruct";

interface Snapshot {
  heapUsed: number;
  external: number;
  rss: number;
}

interface MemoryRun {
  build: string;
  round: number;
  idle: Snapshot;
  open: Snapshot;
  /** (heap + external) grown per open stream, bytes. */
  heapPerStream: number;
  rssPerStream: number;
}

async function startChild(root: string, workerUrls: string[]) {
  const child = fork(CHILD, [root], {
    execArgv: [...TSX_EXEC_ARGV, "--expose-gc"],
    stdio: ["ignore", "ignore", "inherit", "ipc"],
  });
  const ask = (msg: MemoryChildRequest) =>
    new Promise<MemoryChildReply>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("memory child did not answer")), 60_000);
      child.once("message", (reply: MemoryChildReply) => {
        clearTimeout(timer);
        resolve(reply);
      });
      child.send(msg);
    });
  const started = await ask({ type: "start", workerUrls });
  if (started.type !== "started")
    throw new Error(`router did not start: ${JSON.stringify(started)}`);
  return {
    url: started.url,
    snapshot: async (path: string) => {
      await ask({ type: "snapshot", path });
    },
    heap: async (): Promise<Snapshot> => {
      const r = await ask({ type: "heap" });
      if (r.type !== "heap") throw new Error("no heap reply");
      return { heapUsed: r.heapUsed, external: r.external, rss: r.rss };
    },
    stop: () =>
      new Promise<void>((resolve) => {
        child.once("exit", () => resolve());
        child.send({ type: "exit" } satisfies MemoryChildRequest);
        setTimeout(() => child.kill("SIGKILL"), 5000).unref();
      }),
  };
}

/** Opens one streamed chat completion; resolves at its first body chunk. */
function openStream(
  url: string,
  agent: Agent,
  prompt: string,
  maxTokens: number,
): { firstChunk: Promise<void>; done: Promise<void>; destroy: () => void } {
  const req = request(`${url}/v1/chat/completions`, {
    method: "POST",
    agent,
    headers: { "content-type": "application/json" },
  });
  let first: () => void = () => {};
  let done: () => void = () => {};
  const firstChunk = new Promise<void>((resolve) => {
    first = resolve;
  });
  const ended = new Promise<void>((resolve) => {
    done = resolve;
  });
  req.on("error", () => {
    first();
    done();
  });
  req.on("response", (res) => {
    res.on("data", () => first());
    res.on("error", () => {});
    res.on("close", () => {
      first();
      done();
    });
  });
  req.end(
    JSON.stringify({
      model: MODEL,
      stream: true,
      max_tokens: maxTokens,
      messages: [{ role: "user", content: prompt }],
    }),
  );
  return { firstChunk, done: ended, destroy: () => req.destroy() };
}

async function measure(
  build: string,
  root: string,
  workerUrls: string[],
  streams: number,
  round: number,
  /** A directory for heap snapshots of the idle and the loaded router (--snapshots). */
  snapshots?: string,
): Promise<MemoryRun> {
  const router = await startChild(root, workerUrls);
  const agent = new Agent({ keepAlive: true, maxSockets: Number.POSITIVE_INFINITY });
  try {
    // Warm-up: every code path once, streams that end (3 tokens, a second each).
    const warm = Array.from({ length: 20 }, (_, i) =>
      openStream(router.url, agent, `${build} ${round} warm-up ${i}: tell me a story`, 2),
    );
    await Promise.all(warm.map((w) => w.done));
    const idle = await router.heap();
    if (snapshots !== undefined)
      await router.snapshot(
        join(snapshots, `${build.replace(/\W+/g, "_")}-${round}-idle.heapsnapshot`),
      );
    const open = Array.from({ length: streams }, (_, i) =>
      openStream(router.url, agent, `${build} ${round} stream ${i}: tell me a long story`, 600),
    );
    await Promise.all(open.map((s) => s.firstChunk));
    // A chunk or two more each: every stream is in its relay, past the first byte.
    await new Promise((resolve) => setTimeout(resolve, 2500));
    const full = await router.heap();
    if (snapshots !== undefined)
      await router.snapshot(
        join(snapshots, `${build.replace(/\W+/g, "_")}-${round}-open.heapsnapshot`),
      );
    for (const s of open) s.destroy();
    return {
      build,
      round,
      idle,
      open: full,
      heapPerStream: (full.heapUsed + full.external - idle.heapUsed - idle.external) / streams,
      rssPerStream: (full.rss - idle.rss) / streams,
    };
  } finally {
    agent.destroy();
    await router.stop();
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      streams: { type: "string", default: "500" },
      rounds: { type: "string", default: "2" },
      base: { type: "string" },
      snapshots: { type: "string" },
    },
  });
  const streams = Number(values.streams);
  const rounds = Number(values.rounds);
  if (!Number.isInteger(streams) || streams < 1 || !Number.isInteger(rounds) || rounds < 1) {
    console.error("bench:stream-memory: --streams and --rounds take positive integers");
    process.exit(2);
  }
  const base = values.base === undefined ? undefined : buildRef(values.base);
  const builds: [string, string][] = [["current", ROOT]];
  if (base !== undefined) builds.unshift([`base ${values.base}`, base.dir]);
  const host = await childFleetHost();
  const runs: MemoryRun[] = [];
  try {
    const fleet = await host.startFleet({
      count: 4,
      worker: {
        timeScale: 1,
        stepFloorMs: 1000,
        decodePerSeqMs: 0,
        kvReadMsPer1kTokens: 0,
        prefillTokensPerSec: 1e9,
        firstTokenDelayMs: 0,
        maxRunning: streams,
        maxBatchTokens: 1_000_000,
        kvCapacityTokens: 8_000_000,
        model: MODEL,
      },
    });
    const urls = fleet.workers.map((w) => w.url);
    for (let round = 0; round < rounds; round++) {
      const order = round % 2 === 0 ? builds : [...builds].reverse();
      for (const [build, root] of order) {
        const run = await measure(build, root, urls, streams, round, values.snapshots);
        runs.push(run);
        console.log(
          `${build} round ${round + 1}: heap+external ${(run.heapPerStream / 1024).toFixed(1)} KB/stream, ` +
            `RSS ${(run.rssPerStream / 1024).toFixed(1)} KB/stream (idle RSS ${(run.idle.rss / 2 ** 20).toFixed(0)} MB, open ${(run.open.rss / 2 ** 20).toFixed(0)} MB)`,
        );
      }
    }
  } finally {
    await host.close();
    if (base !== undefined) rmSync(base.dir, { recursive: true, force: true });
  }
  mkdirSync(dirname(RESULTS), { recursive: true });
  writeFileSync(
    RESULTS,
    `${JSON.stringify({ benchmark: "stream-memory", date: new Date().toISOString(), command: commandLine("bench:stream-memory"), streams, runs }, null, 2)}\n`,
  );
  console.log(`results: ${RESULTS}`);
}

runIfEntryPoint(import.meta.url, main);
