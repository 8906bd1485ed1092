/**
 * What a refused body costs the router: bench:faults' deep-json flood (8 raw-socket loops posting
 * a 240 KB body nested 120,000 deep, back to back, each refused 400 at its first chunk) against
 * this checkout's build and another git ref's, side by side in alternating rounds. Per round and
 * build: refusals a second, the router's CPU per refusal (user + system time from /proc, which
 * moves less with the machine's load than latency does) and the full collections (mark-compacts,
 * from its --trace-gc lines) per 1,000 refusals. No legitimate traffic: bench:faults measures
 * what the flood does to it; this measures what each refusal costs.
 *
 *   npm run bench:refusal-cost -- --base 20857f2
 *   npm run bench:refusal-cost -- --base main --rounds 6 --secs 5
 *
 * The first round of each build warms the JIT and is left out of the medians. Prints each build's
 * medians and the median and range of the per-round ratios current / base, and writes
 * bench/results/refusal-cost.json.
 */
import { execSync } from "node:child_process";
import { rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { buildRef } from "./lib/build-ref.js";
import { type BuiltRouter, ensureBuilt, startBuiltRouter } from "./lib/built-router.js";
import {
  commandLine,
  machineSummary,
  refuseOldNode,
  runIfEntryPoint,
  writeResults,
} from "./lib/entry.js";
import { childFleetHost } from "./lib/fleet.js";
import { numberFlag } from "./lib/number-flag.js";
import { processCpuMicros } from "./lib/process-cpu.js";
import { deepJsonRequest, rawFlood } from "./lib/raw-attacker.js";
import { median, printTable } from "./lib/stats.js";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const RESULTS = join(ROOT, "bench", "results", "refusal-cost.json");
const ATTACKER_ADDRESS = "127.0.0.2";
const LOOPS = 8;

/** Counts a router's mark-compacts from its --trace-gc lines. */
class FullCollections {
  count = 0;
  readonly onLine = (line: string): void => {
    if (line.includes(": Mark-Compact ")) this.count++;
  };
}

interface Round {
  refusalsPerSec: number;
  cpuMsPerRefusal: number;
  fullGcsPer1000: number;
  /** Answers other than 400 (a connection closed without one, ...). */
  otherAnswers: number;
}

async function round(
  router: BuiltRouter,
  gcs: FullCollections,
  request: Buffer,
  secs: number,
): Promise<Round> {
  const port = Number(new URL(router.url).port);
  let refusals = 0;
  let other = 0;
  const stop = new AbortController();
  const gcsBefore = gcs.count;
  const cpuBefore = processCpuMicros(router.pid) ?? Number.NaN;
  const started = performance.now();
  const flood = rawFlood(
    {
      port,
      localAddress: ATTACKER_ADDRESS,
      loops: LOOPS,
      request,
      onAnswer: (status) => {
        if (status === "400") refusals++;
        else other++;
      },
    },
    stop.signal,
  );
  await new Promise((resolve) => setTimeout(resolve, secs * 1000));
  const cpuMs = ((processCpuMicros(router.pid) ?? Number.NaN) - cpuBefore) / 1000;
  const elapsed = (performance.now() - started) / 1000;
  const fullGcs = gcs.count - gcsBefore;
  stop.abort();
  await flood;
  return {
    refusalsPerSec: refusals / elapsed,
    cpuMsPerRefusal: cpuMs / refusals,
    fullGcsPer1000: (fullGcs * 1000) / refusals,
    otherAnswers: other,
  };
}

async function main(): Promise<void> {
  refuseOldNode("bench:refusal-cost");
  const { values } = parseArgs({
    options: {
      base: { type: "string" },
      rounds: { type: "string", default: "4" },
      secs: { type: "string", default: "5" },
    },
  });
  const rounds = numberFlag("rounds", values.rounds, 2, true) as number;
  const secs = numberFlag("secs", values.secs, 1, false) as number;
  if (values.base === undefined) {
    console.error("bench:refusal-cost: --base <git ref> is required (the build to compare with)");
    process.exit(2);
  }
  const base = buildRef(values.base);
  ensureBuilt();
  const head = execSync("git rev-parse --short HEAD", { cwd: ROOT }).toString().trim();
  const dirty = execSync("git status --porcelain -- src", { cwd: ROOT }).toString() !== "";
  const current = `${head}${dirty ? "+changes" : ""}`;
  // A worker for the routers' readiness; the refused bodies never reach it.
  const host = await childFleetHost();
  const fleet = await host.startFleet({ count: 1, worker: { timeScale: 0 } });
  const args = ["--worker-urls", fleet.workers[0]!.url, "--log-level", "warn"];
  const gcs = { base: new FullCollections(), current: new FullCollections() };
  const routers = {
    base: await startBuiltRouter(args, ["--trace-gc"], base.cli, gcs.base.onLine),
    current: await startBuiltRouter(args, ["--trace-gc"], undefined, gcs.current.onLine),
  };
  const request = deepJsonRequest();
  const results = { base: [] as Round[], current: [] as Round[] };
  try {
    for (let r = 0; r < rounds; r++) {
      // Alternate who goes first, so a drift in the machine's load favours neither.
      const order = r % 2 === 0 ? (["base", "current"] as const) : (["current", "base"] as const);
      for (const name of order) {
        results[name].push(await round(routers[name], gcs[name], request, secs));
      }
      process.stdout.write(`\rround ${r + 1}/${rounds}`);
    }
    process.stdout.write("\n");
  } finally {
    await routers.base.stop();
    await routers.current.stop();
    await host.close();
    rmSync(base.dir, { recursive: true, force: true });
  }
  const of = (rs: Round[], key: keyof Round) => median(rs.slice(1).map((r) => r[key]));
  const ratios = results.base
    .slice(1)
    .map((b, i) => (results.current[i + 1] as Round).cpuMsPerRefusal / b.cpuMsPerRefusal);
  const rows = (["base", "current"] as const).map((name) => [
    name === "base" ? `base ${values.base}` : `current ${current}`,
    of(results[name], "refusalsPerSec").toFixed(0),
    of(results[name], "cpuMsPerRefusal").toFixed(3),
    of(results[name], "fullGcsPer1000").toFixed(2),
    results[name].reduce((n, r) => n + r.otherAnswers, 0),
  ]);
  printTable(
    ["build", "refusals/s", "CPU ms a refusal", "mark-compacts per 1,000", "other answers"],
    rows,
  );
  const ratio = {
    median: median(ratios),
    min: Math.min(...ratios),
    max: Math.max(...ratios),
  };
  console.log(
    `\nCPU a refusal, current / base per round: median ${ratio.median.toFixed(2)} (${ratio.min.toFixed(2)}-${ratio.max.toFixed(2)}) over ${ratios.length} warm rounds`,
  );
  const command = commandLine("bench:refusal-cost");
  const machine = machineSummary();
  console.log(`\n${command}; ${new Date().toISOString()}; ${machine}`);
  writeResults(RESULTS, {
    command,
    machine,
    base: values.base,
    current,
    rounds: results,
    cpuRatio: ratio,
  });
}

runIfEntryPoint(import.meta.url, main);
