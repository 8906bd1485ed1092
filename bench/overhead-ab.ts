/**
 * Before and after: the router's CPU time per request for two builds side by side, in
 * interleaved rounds (base, current, current, base, ...) against the same zero-delay simulated
 * worker, so a machine whose load drifts affects both alike. The base is any git ref, built into
 * a temporary directory (without --base, this checkout's build runs on both sides, e.g. to price a
 * flag with --current-args); the current build is this checkout's dist/ (built when stale). CPU time
 * comes from /proc (bench/lib/process-cpu.ts), as in bench:overhead.
 *
 *   npm run bench:overhead-ab -- --base 511f1a5
 *   npm run bench:overhead-ab -- --base main --modes stream --concurrency 1,16 --rounds 12
 *   npm run bench:overhead-ab -- --current-args="--log-level warn"   one build, two sets of flags
 *   npm run bench:overhead-ab -- --base a51e7be --alloc --modes json --requests 12000 --rounds 4
 *
 * --alloc adds the bytes each build allocates on V8's heap per request, read from its --trace-gc
 * lines (bench/lib/gc-trace.ts): unlike CPU time, that figure does not move with the machine's
 * load, so it compares two builds on a busy machine too (exact to within one interval between
 * collections per round: a few MB, under 1 KB a request at 12000 requests).
 *
 * Prints the median CPU µs per request and requests per second of each build per cell (the first
 * round of each is JIT warm-up and left out), the median of the per-round ratios current / base
 * with their range, and writes bench/results/overhead-ab.json.
 */
import { execSync } from "node:child_process";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { buildRef } from "./lib/build-ref.js";
import { type BuiltRouter, ensureBuilt, startBuiltRouter } from "./lib/built-router.js";
import { commandLine, runIfEntryPoint } from "./lib/entry.js";
import { childFleetHost } from "./lib/fleet.js";
import { GcTrace } from "./lib/gc-trace.js";
import { fmt } from "./lib/latency.js";
import { listFlag } from "./lib/list-flag.js";
import { measure, overheadPrompts } from "./lib/overhead-requests.js";
import { printTable } from "./lib/stats.js";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const RESULTS = join(ROOT, "bench", "results", "overhead-ab.json");

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/**
 * Current / base CPU per request of each round pair (the two builds' runs of one round, back to
 * back): the median and the range. A pair shares the machine's load of its moment, so the ratio
 * drifts less than either build's own figures.
 */
function ratioSpread(
  base: readonly Round[],
  current: readonly Round[],
): { ratioMedian: number; ratioMin: number; ratioMax: number } {
  const ratios = base.map((b, i) => current[i]!.cpuMicrosPerRequest / b.cpuMicrosPerRequest);
  return {
    ratioMedian: median(ratios),
    ratioMin: Math.min(...ratios),
    ratioMax: Math.max(...ratios),
  };
}

interface Round {
  cpuMicrosPerRequest: number;
  requestsPerSec: number;
  /** With --alloc: bytes allocated on V8's heap per request. */
  allocBytesPerRequest?: number;
}

async function round(
  router: BuiltRouter,
  texts: readonly string[],
  stream: boolean,
  concurrency: number,
  requests: number,
  gc: GcTrace | undefined,
): Promise<Round> {
  const warmup = Math.ceil(requests / 5);
  // With a GC trace the warm-up runs apart, so the allocation window holds the measured requests only.
  if (gc !== undefined) await measure(router, texts, stream, concurrency, warmup, 0);
  const mark = gc?.mark();
  const result = await measure(
    router,
    texts,
    stream,
    concurrency,
    requests,
    gc === undefined ? warmup : 0,
  );
  if (result.cpuMicrosPerRequest === undefined) throw new Error("no /proc CPU time");
  if (result.errors > 0) throw new Error(`${result.errors} requests failed`);
  return {
    cpuMicrosPerRequest: result.cpuMicrosPerRequest,
    requestsPerSec: result.requestsPerSec,
    ...(gc !== undefined && mark !== undefined
      ? { allocBytesPerRequest: gc.allocatedSince(mark).bytes / requests }
      : {}),
  };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      base: { type: "string" },
      modes: { type: "string" },
      concurrency: { type: "string" },
      prompt: { type: "string", default: "1024" },
      rounds: { type: "string", default: "10" },
      requests: { type: "string", default: "3000" },
      "base-args": { type: "string", default: "" },
      "current-args": { type: "string", default: "" },
      alloc: { type: "boolean", default: false },
    },
  });
  const flags = (value: string) => value.split(" ").filter((arg) => arg !== "");
  const rounds = Number(values.rounds);
  const requests = Number(values.requests);
  const promptChars = Number(values.prompt);
  const concurrencies = listFlag(
    "bench:overhead-ab",
    values.concurrency,
    [16],
    Number,
    "concurrency",
  );
  const streams = listFlag(
    "bench:overhead-ab",
    values.modes,
    ["json", "stream"],
    String,
    "modes",
  ).map((mode) => mode === "stream");
  if (
    !Number.isInteger(rounds) ||
    rounds < 2 ||
    !Number.isInteger(requests) ||
    requests < 100 ||
    !Number.isInteger(promptChars) ||
    promptChars < 1
  ) {
    console.error(
      "bench:overhead-ab: --rounds >= 2, --requests >= 100, --prompt a positive integer",
    );
    process.exit(2);
  }
  const base = values.base === undefined ? undefined : buildRef(values.base);
  ensureBuilt();
  const head = execSync("git rev-parse --short HEAD", { cwd: ROOT }).toString().trim();
  const dirty = execSync("git status --porcelain -- src", { cwd: ROOT }).toString() !== "";
  const current = `${head}${dirty ? "+changes" : ""}`;
  const host = await childFleetHost();
  const fleet = await host.startFleet({
    count: 1,
    worker: { timeScale: 0, kvCapacityTokens: 2_000_000 },
  });
  const workerUrl = fleet.workers[0]!.url;
  const gc = values.alloc ? { base: new GcTrace(), current: new GcTrace() } : undefined;
  const nodeArgs = values.alloc ? ["--trace-gc"] : [];
  const routers = {
    base: await startBuiltRouter(
      ["--worker-urls", workerUrl, ...flags(values["base-args"])],
      nodeArgs,
      base?.cli,
      gc?.base.onLine,
    ),
    current: await startBuiltRouter(
      ["--worker-urls", workerUrl, ...flags(values["current-args"])],
      nodeArgs,
      undefined,
      gc?.current.onLine,
    ),
  };
  const texts = overheadPrompts(promptChars);
  const cells: Array<{
    stream: boolean;
    concurrency: number;
    base: Round[];
    current: Round[];
  }> = [];
  try {
    for (const stream of streams) {
      for (const concurrency of concurrencies) {
        const cell = { stream, concurrency, base: [] as Round[], current: [] as Round[] };
        for (let r = 0; r < rounds; r++) {
          // Alternate who goes first, so a drift in the machine's load favours neither.
          const order =
            r % 2 === 0 ? (["base", "current"] as const) : (["current", "base"] as const);
          for (const name of order) {
            cell[name].push(
              await round(routers[name], texts, stream, concurrency, requests, gc?.[name]),
            );
          }
          process.stdout.write(
            `\r${stream ? "stream" : "json"} c=${concurrency}: round ${r + 1}/${rounds}`,
          );
        }
        process.stdout.write("\n");
        cells.push(cell);
      }
    }
  } finally {
    await routers.base.stop();
    await routers.current.stop();
    await host.close();
    if (base !== undefined) rmSync(base.dir, { recursive: true, force: true });
  }
  // The first round of each build warms the JIT: left out of the medians.
  const summary = cells.map((c) => {
    const of = (rs: Round[], key: keyof Round) => median(rs.slice(1).map((r) => r[key] ?? 0));
    return {
      mode: c.stream ? "stream" : "json",
      concurrency: c.concurrency,
      baseCpu: of(c.base, "cpuMicrosPerRequest"),
      currentCpu: of(c.current, "cpuMicrosPerRequest"),
      baseRps: of(c.base, "requestsPerSec"),
      currentRps: of(c.current, "requestsPerSec"),
      ...ratioSpread(c.base.slice(1), c.current.slice(1)),
      ...(values.alloc
        ? {
            baseAllocKb: of(c.base, "allocBytesPerRequest") / 1024,
            currentAllocKb: of(c.current, "allocBytesPerRequest") / 1024,
          }
        : {}),
    };
  });
  console.log(
    `\nbase ${values.base ?? current} ${values["base-args"]}, current ${current} ${values["current-args"]}; ${promptChars}-character prompts, ${requests} requests a round, ${rounds} rounds (medians without the first)`,
  );
  printTable(
    [
      "mode",
      "conc",
      "base cpu µs/req",
      "current cpu µs/req",
      "change",
      "median of round ratios (min-max)",
      "base req/s",
      "current req/s",
    ],
    summary.map((s) => [
      s.mode,
      s.concurrency,
      fmt(s.baseCpu, 0),
      fmt(s.currentCpu, 0),
      `${fmt((100 * (s.currentCpu - s.baseCpu)) / s.baseCpu, 0)}%`,
      `${fmt(s.ratioMedian, 3)} (${fmt(s.ratioMin, 3)}-${fmt(s.ratioMax, 3)})`,
      fmt(s.baseRps, 0),
      fmt(s.currentRps, 0),
    ]),
  );
  if (values.alloc) {
    console.log("\nV8 heap allocated per request (--trace-gc; load-independent):");
    printTable(
      ["mode", "conc", "base KB/req", "current KB/req", "change"],
      summary.map((s) => [
        s.mode,
        s.concurrency,
        fmt(s.baseAllocKb ?? 0, 1),
        fmt(s.currentAllocKb ?? 0, 1),
        `${fmt((100 * ((s.currentAllocKb ?? 0) - (s.baseAllocKb ?? 0))) / (s.baseAllocKb ?? 1), 0)}%`,
      ]),
    );
  }
  mkdirSync(dirname(RESULTS), { recursive: true });
  writeFileSync(
    RESULTS,
    `${JSON.stringify(
      {
        benchmark: "overhead-ab",
        date: new Date().toISOString(),
        node: process.version,
        command: commandLine("bench:overhead-ab"),
        base: values.base ?? current,
        baseArgs: values["base-args"],
        current,
        currentArgs: values["current-args"],
        promptChars,
        requests,
        rounds,
        cells,
        summary,
      },
      null,
      2,
    )}\n`,
  );
  console.log(`\nresults: ${RESULTS}`);
}

runIfEntryPoint(import.meta.url, main);
