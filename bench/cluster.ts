/**
 * What radixgate-cluster's local channel costs (issue 23 item 4): CPU time per request of one
 * router process (`node dist/cli.js`), of `radixgate-cluster --processes 2` sharing decisions
 * over node:cluster IPC (the default), and of the same with `--no-share`, each read from /proc
 * per process (the primary apart from its router processes), interleaved in rounds. CPU per
 * request moves little with the machine's load, where requests per second do not.
 *
 * Two prompt sets: `repeat` cycles 64 prompts (held by the index after the warm-up: each
 * decision sends one insert to the sibling), `new` sends a prompt nobody has seen each time (each
 * decision also claims its new prefix at the primary: a round trip on the channel).
 *
 *   npm run bench:cluster                     3 rounds of 3,000 requests per row and prompt set
 *   npm run bench:cluster -- --requests 1000 --rounds 1
 *
 * Prints a table and writes bench/results/cluster.json.
 */
import os from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { type BuiltRouter, startBuiltCluster, startBuiltRouter } from "./lib/built-router.js";
import { commandLine, machineSummary, runIfEntryPoint, writeResults } from "./lib/entry.js";
import { childFleetHost } from "./lib/fleet.js";
import { fmt } from "./lib/latency.js";
import { loadAgent, runLoad } from "./lib/load.js";
import { overheadJobs, overheadPrompts } from "./lib/overhead-requests.js";
import { childPids, processCpuMicros } from "./lib/process-cpu.js";
import { median, printTable } from "./lib/stats.js";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const RESULTS = join(ROOT, "bench", "results", "cluster.json");
const ROWS = ["router", "cluster", "cluster --no-share"] as const;
type Row = (typeof ROWS)[number];
const PROMPT_SETS = ["repeat", "new"] as const;
type PromptSet = (typeof PROMPT_SETS)[number];

interface Run {
  row: Row;
  prompts: PromptSet;
  round: number;
  requests: number;
  errors: number;
  requestsPerSec: number;
  /** CPU µs per request: every process of the row, the primary alone, each router process. */
  cpuTotal: number;
  cpuPrimary: number;
  cpuPerProcess: number[];
}

function cpuOf(pids: readonly number[]): number[] {
  return pids.map((pid) => processCpuMicros(pid) ?? Number.NaN);
}

async function measureRow(
  row: Row,
  prompts: PromptSet,
  round: number,
  workerUrls: string[],
  o: { requests: number; warmup: number; concurrency: number; chars: number },
): Promise<Run> {
  const args = ["--worker-urls", ...workerUrls, "--log-level", "warn"];
  const router: BuiltRouter =
    row === "router"
      ? await startBuiltRouter(args)
      : await startBuiltCluster(2, args, row === "cluster" ? [] : ["--no-share"]);
  const dispatcher = loadAgent(o.concurrency);
  try {
    const seed = 1000 * round + (prompts === "new" ? 7 : 3);
    const texts =
      prompts === "repeat"
        ? overheadPrompts(o.chars, seed)
        : Array.from({ length: o.warmup + o.requests }, (_, i) =>
            `${i} ${overheadPrompts(o.chars, seed + i)[0]}`.slice(0, o.chars),
          );
    const warm = texts.slice(0, prompts === "repeat" ? texts.length : o.warmup);
    const measured = prompts === "repeat" ? texts : texts.slice(o.warmup);
    await runLoad(overheadJobs(router.url, warm, false, o.warmup), {
      dispatcher,
      concurrency: o.concurrency,
    });
    const primary = router.pid;
    const children = row === "router" ? [] : childPids(primary);
    const pids = [primary, ...children];
    const before = cpuOf(pids);
    const run = await runLoad(overheadJobs(router.url, measured, false, o.requests), {
      dispatcher,
      concurrency: o.concurrency,
    });
    const after = cpuOf(pids);
    const used = after.map((a, i) => (a - (before[i] as number)) / o.requests);
    const ok = run.outcomes.filter((x) => x.ok).length;
    return {
      row,
      prompts,
      round,
      requests: o.requests,
      errors: o.requests - ok,
      requestsPerSec: (ok * 1000) / run.wallMs,
      cpuTotal: used.reduce((s, x) => s + x, 0),
      cpuPrimary: row === "router" ? Number.NaN : (used[0] as number),
      cpuPerProcess: row === "router" ? used : used.slice(1),
    };
  } finally {
    await dispatcher.close();
    await router.stop();
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      requests: { type: "string", default: "3000" },
      rounds: { type: "string", default: "3" },
      help: { type: "boolean", default: false },
    },
  });
  if (values.help) {
    console.log("usage: npm run bench:cluster -- [--requests N] [--rounds R]");
    return;
  }
  const requests = Number(values.requests);
  const rounds = Number(values.rounds);
  if (!Number.isInteger(requests) || requests < 100 || !Number.isInteger(rounds) || rounds < 1) {
    console.error("bench:cluster: --requests must be an integer >= 100, --rounds >= 1");
    process.exit(2);
  }
  const o = { requests, warmup: 300, concurrency: 16, chars: 2048 };
  const host = await childFleetHost();
  const runs: Run[] = [];
  const load = [os.loadavg()[0] as number];
  try {
    const fleet = await host.startFleet({ count: 4, worker: { timeScale: 0 } });
    const urls = fleet.workers.map((w) => w.url);
    try {
      for (let round = 0; round < rounds; round++) {
        for (const prompts of PROMPT_SETS) {
          // The rows' order turns each round, so none always runs first.
          for (let k = 0; k < ROWS.length; k++) {
            const row = ROWS[(k + round) % ROWS.length] as Row;
            const run = await measureRow(row, prompts, round, urls, o);
            runs.push(run);
            console.error(
              `round ${round + 1}/${rounds} ${prompts} ${row}: ${fmt(run.cpuTotal, 1)} µs CPU/request ` +
                `(primary ${fmt(run.cpuPrimary, 1)}, processes ${run.cpuPerProcess.map((x) => fmt(x, 1)).join(" + ")}), ` +
                `${fmt(run.requestsPerSec, 0)} req/s, errors ${run.errors}`,
            );
          }
        }
      }
    } finally {
      await fleet.close();
    }
  } finally {
    await host.close();
  }
  load.push(os.loadavg()[0] as number);
  const table: (string | number)[][] = [];
  for (const prompts of PROMPT_SETS) {
    for (const row of ROWS) {
      const mine = runs.filter((r) => r.row === row && r.prompts === prompts);
      const perProcess = [0, 1]
        .map((i) => median(mine.map((r) => r.cpuPerProcess[i] ?? Number.NaN)))
        .filter(Number.isFinite);
      table.push([
        prompts,
        row,
        fmt(median(mine.map((r) => r.cpuTotal)), 1),
        fmt(median(mine.map((r) => r.cpuPrimary)), 1),
        perProcess.map((x) => fmt(x, 1)).join(" / "),
        fmt(median(mine.map((r) => r.requestsPerSec)), 0),
        mine.reduce((s, r) => s + r.errors, 0),
      ]);
    }
  }
  console.log(
    `\n${requests} requests per run (2,048-character prompts, 16 output tokens, concurrency 16, 4 engines), ${rounds} rounds; medians; load average ${load.map((x) => x.toFixed(1)).join(" → ")}`,
  );
  printTable(
    ["prompts", "row", "CPU µs/request (all)", "primary", "per router process", "req/s", "errors"],
    table,
  );
  writeResults(RESULTS, {
    command: commandLine("bench:cluster"),
    date: new Date().toISOString(),
    machine: machineSummary(),
    loadAverage: load,
    runs,
  });
}

runIfEntryPoint(import.meta.url, main);
