/**
 * Streaming relay cost (issue 23): simulated engines stream K chunks per request, one every I ms
 * after a first-token delay F; a load process (bench/lib/stream-load.ts) holds C streams open at
 * once, each with its own prompt, for D seconds; the same load goes straight to the engines
 * (direct), through nginx (one worker process, proxy_buffering off), through the router
 * (`node dist/cli.js`) and through `radixgate-cluster` (`node dist/cluster.js`). Rows run
 * interleaved in rounds; the table gives medians over rounds, latencies added over the direct run
 * of the same round, and the medians of the per-round ratios against nginx. A proxy's CPU per
 * chunk (user + system) and RSS come from /proc; the direct row records the machine's own ceiling
 * (a round where it falls behind the pacing is flagged).
 *
 *   npm run bench:stream                          K=100, I=20 ms, F=50 ms, C=100,500, D=10 s, 3 rounds
 *   npm run bench:stream -- --quick               a smoke run (seconds)
 *   npm run bench:stream -- --streams 500 --rounds 1 --cpu-prof /tmp/prof   router profile
 *   npm run bench:stream -- --help
 *
 * nginx is installed with apt-get when missing (as root); without it the nginx row and the ratios
 * are left out. Prints a table and writes bench/results/stream.json.
 */
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import { dirname, join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { configWith } from "../src/config.js";
import { startBareNodeProxy } from "./lib/bare-node-proxy.js";
import { buildRef } from "./lib/build-ref.js";
import { startBuiltCluster, startBuiltRouter } from "./lib/built-router.js";
import { commandLine, runIfEntryPoint } from "./lib/entry.js";
import { childFleetHost, pacedEngine } from "./lib/fleet.js";
import { listFlag } from "./lib/list-flag.js";
import { ensureNginx, nginxHasNjs, startNginx } from "./lib/nginx.js";
import { startNginxFloor } from "./lib/nginx-floor.js";
import { processCpuMicros, processTree } from "./lib/process-cpu.js";
import { startRouterProcess } from "./lib/router-process.js";
import type { StreamLoadResult } from "./lib/stream-load.js";
import { startStreamLoadProcess } from "./lib/stream-load-process.js";
import {
  printSummary,
  ROWS,
  type RowName,
  type RowRun,
  type RowSummary,
  summarize,
} from "./lib/stream-report.js";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const RESULTS = join(ROOT, "bench", "results", "stream.json");
const MODEL = "meta-llama/Llama-3.1-8B-Instruct";

const USAGE = `usage: npm run bench:stream -- [flags]
  --chunks K          token chunks per stream (default 100)
  --interval-ms I     ms between chunks (default 20)
  --first-token-ms F  engine's first-token delay, ms (default 50)
  --streams C,...     concurrent streams, a list (default 100,500)
  --duration D        measured seconds per run (default 10)
  --rounds N          rounds of interleaved rows (default 3)
  --engines N         simulated engines (default 4)
  --rows a,b,...      among direct, nginx, bare, base, router, router-nginx, nginx-floor,
                      cluster (default direct, nginx, router, router-nginx, nginx-floor, cluster;
                      direct always runs). bare: a bare Node.js proxy (node:http + undici,
                      pipe(): the runtime's floor); router-nginx: --data-plane nginx (needs
                      nginx's njs module: apt-get install libnginx-mod-http-js), CPU of nginx and
                      the router together; nginx-floor: the same nginx configuration in front of
                      a Node.js process that answers every decision with a fixed redirect (the
                      least a decision call to Node.js costs); base: the router built from --base
  --base REF          a git ref to build as the base row (before/after in the same rounds)
  --base-node-args A  node flags for the base row's process, e.g. "--max-semi-space-size=2"
                      (with --base HEAD: one build, two runtime settings)
  --processes N       radixgate-cluster processes (default 2)
  --cpu-prof DIR      the router writes a .cpuprofile there when it stops
  --usage             streams ask for the token counts (stream_options.include_usage): the
                      engine sends one more event, and --data-plane nginx reads it with its njs
                      body filter, which then runs on every chunk (off: no script runs there)
  --warmup W          seconds of load (50 streams) on every row before the first measurement
                      (default 1); a Node.js proxy keeps compiling its hot code for tens of
                      seconds after it starts, on helper threads whose CPU the row counts
  --idle              also each proxy's CPU with nothing in flight, over D seconds after the
                      warm-up: the background work (engine polls, health checks, timers) that
                      the CPU per chunk carries at a low chunk rate
  --quick             smoke run: K=20, C=20, D=2, 1 round
  --help              this text`;

export interface StreamBenchOptions {
  chunks: number;
  intervalMs: number;
  firstTokenMs: number;
  streams: number[];
  durationSecs: number;
  /** Seconds of load on every row before the first measurement (default 1). */
  warmupSecs?: number;
  rounds: number;
  engines: number;
  rows: RowName[];
  processes: number;
  /** Run the router from TypeScript (tsx, startRouter) instead of dist/: the test, no build. */
  fromSource?: boolean;
  /** Check every chunk's text and order. */
  verify?: boolean;
  /** Streams ask for the token counts (stream_options.include_usage). */
  usage?: boolean;
  cpuProfDir?: string;
  /** Measure each row's CPU with nothing in flight (ms per second). */
  idle?: boolean;
  /** The git ref of the base row. */
  base?: string;
  /** Node flags of the base row's process. */
  baseNodeArgs?: string[];
  /** Progress lines on stdout. */
  log?: (line: string) => void;
}

export interface StreamBenchReport {
  benchmark: "stream";
  date: string;
  node: string;
  machine: string;
  loadAverage: number[];
  options: Omit<StreamBenchOptions, "log">;
  lifetimeMs: number;
  nginx: boolean;
  runs: RowRun[];
  summary: RowSummary[];
  /** --idle: each proxy's CPU with nothing in flight. */
  idle: IdleCpu[];
}

export interface IdleCpu {
  row: RowName;
  /** All of the row's processes, ms of CPU per second. */
  msPerSec: number;
  /** Of it, the first process's (radixgate's own beside the nginx it starts). */
  firstMsPerSec: number;
}

function usageError(message: string): never {
  console.error(`bench:stream: ${message}\n${USAGE}`);
  process.exit(2);
}

function positive(flag: string, value: string | undefined, fallback: number, min = 1): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (value.trim() === "" || !Number.isFinite(n) || n < min) {
    usageError(`--${flag} ${value}: expected a number >= ${min}`);
  }
  return n;
}

function integer(flag: string, value: string | undefined, fallback: number): number {
  const n = positive(flag, value, fallback);
  if (!Number.isInteger(n)) usageError(`--${flag} ${value}: expected an integer`);
  return n;
}

export function parseStreamFlags(argv: readonly string[]): StreamBenchOptions {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: [...argv],
      options: {
        chunks: { type: "string" },
        "interval-ms": { type: "string" },
        "first-token-ms": { type: "string" },
        streams: { type: "string" },
        duration: { type: "string" },
        warmup: { type: "string" },
        rounds: { type: "string" },
        engines: { type: "string" },
        rows: { type: "string" },
        processes: { type: "string" },
        "cpu-prof": { type: "string" },
        base: { type: "string" },
        "base-node-args": { type: "string" },
        quick: { type: "boolean", default: false },
        idle: { type: "boolean", default: false },
        usage: { type: "boolean", default: false },
        help: { type: "boolean", default: false },
      },
    }));
  } catch (err) {
    usageError((err as Error).message);
  }
  if (values.help === true) {
    console.log(USAGE);
    process.exit(0);
  }
  const quick = values.quick === true;
  const str = (k: string) => values[k] as string | undefined;
  const defaultRows: RowName[] =
    str("base") === undefined
      ? ["direct", "nginx", "router", "router-nginx", "nginx-floor", "cluster"]
      : ["direct", "nginx", "base", "router", "router-nginx", "nginx-floor", "cluster"];
  const rows =
    str("rows") === undefined
      ? defaultRows
      : (listFlag("bench:stream", str("rows"), [...ROWS], String, "rows") as RowName[]);
  if (rows.includes("base") && str("base") === undefined)
    usageError("--rows base needs --base REF");
  return {
    chunks: integer("chunks", str("chunks"), quick ? 20 : 100),
    intervalMs: positive("interval-ms", str("interval-ms"), 20),
    firstTokenMs: positive("first-token-ms", str("first-token-ms"), 50, 0),
    streams: listFlag("bench:stream", str("streams"), quick ? [20] : [100, 500], Number, "streams"),
    durationSecs: positive("duration", str("duration"), quick ? 2 : 10),
    warmupSecs: positive("warmup", str("warmup"), 1, 0),
    rounds: integer("rounds", str("rounds"), quick ? 1 : 3),
    engines: integer("engines", str("engines"), 4),
    rows: ["direct", ...rows.filter((r) => r !== "direct")],
    processes: integer("processes", str("processes"), 2),
    idle: values.idle === true,
    usage: values.usage === true,
    ...(str("cpu-prof") === undefined ? {} : { cpuProfDir: str("cpu-prof")! }),
    ...(str("base") === undefined ? {} : { base: str("base")! }),
    baseNodeArgs: (str("base-node-args") ?? "").split(" ").filter((a) => a !== ""),
  };
}

interface Target {
  urls: string[];
  /** The proxy's processes, for /proc (none for direct). */
  pids: () => number[];
  stop: () => Promise<void>;
}

export async function runStreamBench(o: StreamBenchOptions): Promise<StreamBenchReport> {
  const log = o.log ?? (() => {});
  // One step per interval whatever the batch; the first chunk after F plus one or two steps.
  const lifetimeMs = o.firstTokenMs + (o.chunks + 0.5) * o.intervalMs;
  const maxStreams = Math.max(...o.streams);
  const host = await childFleetHost();
  const targets = new Map<RowName, Target>();
  const load = startStreamLoadProcess();
  let nginxFound = false;
  const runs: RowRun[] = [];
  const idle: IdleCpu[] = [];
  try {
    const fleet = await host.startFleet({
      count: o.engines,
      worker: pacedEngine(o.intervalMs, o.firstTokenMs, MODEL, maxStreams),
    });
    const engines = fleet.workers.map((w) => w.url);
    targets.set("direct", { urls: engines, pids: () => [], stop: async () => {} });
    if (o.rows.includes("nginx") && ensureNginx("bench:stream") !== undefined) {
      const nginx = await startNginx(engines);
      if (nginx !== undefined) {
        nginxFound = true;
        const pid = () => nginx.workerPid();
        targets.set("nginx", { urls: [nginx.url], pids: () => [pid() ?? -1], stop: nginx.stop });
      }
    }
    if (o.rows.includes("router")) {
      const profile =
        o.cpuProfDir === undefined ? [] : ["--cpu-prof", `--cpu-prof-dir=${o.cpuProfDir}`];
      const router = o.fromSource
        ? await startRouterProcess(
            configWith({ host: "127.0.0.1", port: 0, workerUrls: engines }),
            "ignore",
            profile,
          )
        : await startBuiltRouter(["--worker-urls", ...engines], profile);
      targets.set("router", { urls: [router.url], pids: () => [router.pid], stop: router.stop });
    }
    // --data-plane nginx: nginx (with njs) relays, the router decides; both processes' CPU.
    if (o.rows.includes("router-nginx") && nginxFound && nginxHasNjs()) {
      const profile =
        o.cpuProfDir === undefined ? [] : ["--cpu-prof", `--cpu-prof-dir=${o.cpuProfDir}`];
      const router = await startBuiltRouter(
        [
          "--data-plane",
          "nginx",
          "--nginx-binary",
          ensureNginx("bench:stream") ?? "nginx",
          "--worker-urls",
          ...engines,
        ],
        profile,
      );
      targets.set("router-nginx", {
        urls: [router.url],
        pids: () => processTree(router.pid),
        stop: router.stop,
      });
    }
    const floorNginx = o.rows.includes("nginx-floor") ? ensureNginx("bench:stream") : undefined;
    if (floorNginx !== undefined && nginxHasNjs()) {
      const floor = await startNginxFloor(floorNginx, engines);
      targets.set("nginx-floor", { urls: [floor.url], pids: floor.pids, stop: floor.stop });
    }
    if (o.rows.includes("bare")) {
      const bare = await startBareNodeProxy(engines);
      targets.set("bare", { urls: [bare.url], pids: () => [bare.pid], stop: bare.stop });
    }
    if (o.rows.includes("base") && o.base !== undefined) {
      const built = buildRef(o.base);
      const base = await startBuiltRouter(
        ["--worker-urls", ...engines],
        o.baseNodeArgs ?? [],
        built.cli,
      );
      targets.set("base", {
        urls: [base.url],
        pids: () => [base.pid],
        stop: async () => {
          await base.stop();
          rmSync(built.dir, { recursive: true, force: true });
        },
      });
    }
    if (o.rows.includes("cluster")) {
      const cluster = await startBuiltCluster(o.processes, ["--worker-urls", ...engines]);
      targets.set("cluster", {
        urls: [cluster.url],
        pids: () => processTree(cluster.pid),
        stop: cluster.stop,
      });
    }
    const order = [...targets.keys()];
    const runOnce = (row: RowName, streams: number, durationMs: number, label: string) => {
      const t = targets.get(row)!;
      return load.run({
        origins: t.urls,
        streams,
        chunks: o.chunks,
        lifetimeMs,
        durationMs,
        label,
        model: MODEL,
        verify: o.verify === true,
        usage: o.usage === true,
        pids: t.pids(),
      });
    };
    // Warm-up: every code path of every proxy before the first measurement.
    const warmupMs = (o.warmupSecs ?? 1) * 1000;
    for (const row of order) {
      if (warmupMs > 0) await runOnce(row, Math.min(maxStreams, 50), warmupMs, `warm ${row}`);
    }
    if (o.idle === true) {
      for (const row of order) {
        const pids = targets.get(row)!.pids();
        if (pids.length === 0) continue;
        const cpu = idleCpu(pids, o.durationSecs * 1000);
        idle.push({ row, ...(await cpu) });
      }
    }
    for (const streams of o.streams) {
      for (let round = 0; round < o.rounds; round++) {
        // Rotated each round, so no row always runs right after the same other one.
        const rotated = order.map((_, i) => order[(i + round) % order.length]!);
        for (const row of rotated) {
          const result: StreamLoadResult = await runOnce(
            row,
            streams,
            o.durationSecs * 1000,
            `c${streams} r${round} ${row}`,
          );
          runs.push({ row, round, streams, result });
          log(
            `C=${streams} round ${round + 1}/${o.rounds} ${row}: ${result.chunksPerSec.toFixed(0)} chunks/s, ` +
              `first chunk p50 ${result.firstChunkMs.p50.toFixed(1)} ms, errors ${result.errors}, incomplete ${result.incomplete}`,
          );
        }
      }
    }
  } finally {
    await load.close();
    for (const t of targets.values()) await t.stop();
    await host.close();
  }
  const { log: _log, ...options } = o;
  return {
    benchmark: "stream",
    date: new Date().toISOString(),
    node: process.version,
    machine: `${os.cpus().length} × ${os.cpus()[0]?.model ?? "cpu"}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, ${os.platform()} ${os.release()}`,
    loadAverage: os.loadavg(),
    options,
    lifetimeMs,
    nginx: nginxFound,
    runs,
    idle,
    summary: summarize(runs, { chunks: o.chunks, intervalMs: o.intervalMs, lifetimeMs }),
  };
}

/** CPU of `pids` (all, and the first) over `ms` with nothing sent, after a second to settle. */
async function idleCpu(
  pids: readonly number[],
  ms: number,
): Promise<{ msPerSec: number; firstMsPerSec: number }> {
  const read = (list: readonly number[]) =>
    list.reduce((total, pid) => total + (processCpuMicros(pid) ?? 0), 0);
  await sleep(1000);
  const [all0, first0, t0] = [read(pids), read(pids.slice(0, 1)), performance.now()];
  await sleep(ms);
  // µs of CPU per ms of wall time is ms per second.
  const elapsedMs = performance.now() - t0;
  return {
    msPerSec: (read(pids) - all0) / elapsedMs,
    firstMsPerSec: (read(pids.slice(0, 1)) - first0) / elapsedMs,
  };
}

async function main(): Promise<void> {
  const options = parseStreamFlags(process.argv.slice(2));
  console.log(
    `bench:stream — ${new Date().toISOString()} — node ${process.version} — load average ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(" ")}`,
  );
  const report = await runStreamBench({ ...options, log: (line) => console.log(line) });
  if (options.rows.includes("nginx") && !report.nginx)
    console.log("nginx: not available, no baseline");
  console.log(
    `\nK=${options.chunks} chunks every ${options.intervalMs} ms after ${options.firstTokenMs} ms, ` +
      `${options.engines} engines, D=${options.durationSecs} s, ${options.rounds} rounds; medians over rounds; ` +
      "+ = added over direct in the same round; ×nginx = median of per-round ratios",
  );
  printSummary(report.summary);
  for (const i of report.idle) {
    const parts =
      i.row === "router-nginx"
        ? ` (radixgate ${i.firstMsPerSec.toFixed(1)}, its nginx ${(i.msPerSec - i.firstMsPerSec).toFixed(1)})`
        : "";
    console.log(`idle ${i.row}: ${i.msPerSec.toFixed(1)} ms CPU per second${parts}`);
  }
  mkdirSync(dirname(RESULTS), { recursive: true });
  writeFileSync(
    RESULTS,
    `${JSON.stringify({ ...report, command: commandLine("bench:stream") }, null, 2)}\n`,
  );
  console.log(`\nresults: ${RESULTS}`);
}

runIfEntryPoint(import.meta.url, main);
