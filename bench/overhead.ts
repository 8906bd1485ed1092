/**
 * Proxy overhead: the latency and throughput cost of going through radixgate. The same requests go
 * straight to one simulated worker in zero-delay mode (timeScale 0: it answers as fast as it can
 * compute) and through the router (built and run as production runs it, `node dist/cli.js` with
 * default flags, its info-level access log to /dev/null), at several concurrencies, prompt sizes,
 * streamed and not. Each proxy's CPU time per request comes from /proc (bench/lib/process-cpu.ts):
 * unlike latency, it does not move with the machine's load.
 *
 *   npm run bench:overhead                     3000 measured requests per cell (a few minutes)
 *   npm run bench:overhead -- --quick          200 per cell
 *   npm run bench:overhead -- --requests 5000
 *   npm run bench:overhead -- --cpu-prof bench/results/prof   the router writes a .cpuprofile there
 *   npm run bench:overhead -- --prompts 1024 --modes json --concurrency 16   one cell
 *   npm run bench:overhead -- --router-args="--log-level warn"   the router with other flags
 *   npm run bench:overhead -- --prompts 1024 --modes json --concurrency 1 --requests 500 --rounds 12
 *       each cell's targets in 12 interleaved rounds: per target the median round, and each added
 *       p50 against the direct run of its own round (steadier than one long run on a busy machine)
 *
 * When nginx is installed (`apt-get install nginx-light`), the same requests also go through nginx
 * as a plain reverse proxy to the same worker (bench/lib/nginx.ts), in the same run, for a
 * baseline: "nginx added" and "router/nginx" columns. A bare Node.js proxy (bench/lib/bare-node-proxy.ts:
 * node:http + undici, nothing else) runs too: the floor any Node.js proxy starts from. With
 * nginx's njs module, the router runs with --data-plane nginx too (router-nginx), beside its floor
 * (bench/lib/nginx-floor.ts: the same nginx configuration in front of a Node.js process that
 * answers every decision with a fixed redirect): "floor" columns.
 *
 * Prints a table and writes bench/results/overhead.json.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import os from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { startBareNodeProxy } from "./lib/bare-node-proxy.js";
import { startBuiltRouter } from "./lib/built-router.js";
import { commandLine, runIfEntryPoint } from "./lib/entry.js";
import { childFleetHost } from "./lib/fleet.js";
import { fmt } from "./lib/latency.js";
import { listFlag } from "./lib/list-flag.js";
import { findNginx, nginxHasNjs as hasNjs, type NginxProxy, startNginx } from "./lib/nginx.js";
import { startNginxFloor } from "./lib/nginx-floor.js";
import {
  measure,
  OUTPUT_TOKENS,
  overheadPrompts,
  type TargetResult,
} from "./lib/overhead-requests.js";
import { processTree } from "./lib/process-cpu.js";
import { median, printTable } from "./lib/stats.js";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const RESULTS = join(ROOT, "bench", "results", "overhead.json");

const CONCURRENCIES = [1, 16, 64];
const PROMPT_CHARS = [1024, 8192, 32_768];
const MODES = ["json", "stream"];

export interface CellResult {
  promptChars: number;
  stream: boolean;
  concurrency: number;
  direct: TargetResult;
  router: TargetResult;
  addedP50Ms: number;
  addedP99Ms: number;
  throughputRatio: number;
  /** The same requests through nginx (when installed). */
  nginx?: TargetResult;
  nginxAddedP50Ms?: number;
  /** Router requests/s over nginx's. */
  routerVsNginx?: number;
  /** The same requests through the bare Node.js proxy. */
  bareNode?: TargetResult;
  bareNodeAddedP50Ms?: number;
  /** Bare Node.js proxy requests/s over nginx's. */
  bareNodeVsNginx?: number;
  /** The router with --data-plane nginx (nginx relays, the router decides). */
  routerNginx?: TargetResult;
  routerNginxAddedP50Ms?: number;
  /** router-nginx requests/s over plain nginx's. */
  routerNginxVsNginx?: number;
  /** nginx with radixgate's configuration before a Node.js decider that does nothing. */
  floor?: TargetResult;
  floorAddedP50Ms?: number;
  /** Floor requests/s over plain nginx's. */
  floorVsNginx?: number;
}

/** How measure() reaches a target: a URL, or a proxy with the pid(s) whose CPU time is read. */
type Target = Parameters<typeof measure>[0];

/** A cell's targets measured over rounds: each target's figures, and its added p50. */
export interface MeasuredRounds {
  /** The median round's figures per field (errors and requests summed); undefined: not run. */
  result(name: string): TargetResult | undefined;
  /** The median over rounds of the target's p50 minus direct's p50 in the same round, ms. */
  addedP50(name: string): number;
}

/**
 * Every target of a cell, `rounds` times in turn, the order reversed every other round: a load
 * that drifts, or a neighbour that wakes, falls on every target alike, and each added p50 is taken
 * against the direct run of its own round. With one round, each target once, in the order given.
 */
export async function measureRounds(
  targets: readonly (readonly [string, Target | undefined])[],
  rounds: number,
  run: (target: Target, name: string) => Promise<TargetResult>,
): Promise<MeasuredRounds> {
  const present = targets.filter((t): t is readonly [string, Target] => t[1] !== undefined);
  const runs = new Map<string, TargetResult[]>(present.map(([name]) => [name, []]));
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? present : [...present].reverse();
    for (const [name, target] of order) {
      const label = rounds === 1 ? name : `${name} (round ${round + 1}/${rounds})`;
      runs.get(name)!.push(await run(target, label));
    }
  }
  return {
    result: (name) => {
      const results = runs.get(name);
      return results === undefined ? undefined : medianResult(results);
    },
    addedP50: (name) => {
      const direct = runs.get("direct") ?? [];
      const results = runs.get(name) ?? [];
      return median(results.map((r, i) => r.latencyMs.p50 - (direct[i]?.latencyMs.p50 ?? NaN)));
    },
  };
}

/** Per field, the median over rounds; the counts are summed. One round: itself. */
export function medianResult(results: readonly TargetResult[]): TargetResult {
  if (results.length === 1) return results[0]!;
  const of = (pick: (r: TargetResult) => number | undefined) =>
    median(results.map((r) => pick(r) ?? Number.NaN));
  const latency = (pick: (r: TargetResult) => TargetResult["latencyMs"]) => ({
    count: results.reduce((n, r) => n + pick(r).count, 0),
    mean: of((r) => pick(r).mean),
    p50: of((r) => pick(r).p50),
    p90: of((r) => pick(r).p90),
    p99: of((r) => pick(r).p99),
    max: Math.max(...results.map((r) => pick(r).max)),
  });
  const cpu = of((r) => r.cpuMicrosPerRequest);
  const firstCpu = of((r) => r.firstCpuMicrosPerRequest);
  return {
    requests: results.reduce((n, r) => n + r.requests, 0),
    errors: results.reduce((n, r) => n + r.errors, 0),
    latencyMs: latency((r) => r.latencyMs),
    ttftMs: latency((r) => r.ttftMs),
    requestsPerSec: of((r) => r.requestsPerSec),
    ...(Number.isNaN(cpu) ? {} : { cpuMicrosPerRequest: cpu }),
    ...(Number.isNaN(firstCpu) ? {} : { firstCpuMicrosPerRequest: firstCpu }),
  };
}

/** A row of nginx before a Node.js decider: added p50, req/s, CPU (both, the decider's), ×nginx. */
function nginxPlaneColumns(r: TargetResult, addedP50Ms: number, vsNginx: number): string[] {
  return [
    fmt(addedP50Ms, 2),
    fmt(r.requestsPerSec, 0),
    fmt(r.cpuMicrosPerRequest ?? Number.NaN, 0),
    fmt(r.firstCpuMicrosPerRequest ?? Number.NaN, 0),
    fmt(vsNginx, 2),
  ];
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      quick: { type: "boolean", default: false },
      requests: { type: "string" },
      "cpu-prof": { type: "string" },
      prompts: { type: "string" },
      modes: { type: "string" },
      concurrency: { type: "string" },
      "router-args": { type: "string" },
      rounds: { type: "string", default: "1" },
    },
  });
  const routerArgs = (values["router-args"] ?? "").split(" ").filter((arg) => arg !== "");
  const promptSizes = listFlag("bench:overhead", values.prompts, PROMPT_CHARS, Number, "prompts");
  const streams = listFlag("bench:overhead", values.modes, MODES, String, "modes").map(
    (m) => m === "stream",
  );
  const concurrencies = listFlag(
    "bench:overhead",
    values.concurrency,
    CONCURRENCIES,
    Number,
    "concurrency",
  );
  const cpuProfDir = values["cpu-prof"];
  const requests = Number(values.requests ?? (values.quick ? 200 : 3000));
  if (!Number.isInteger(requests) || requests < 10) {
    console.error("bench:overhead: --requests must be an integer >= 10");
    process.exit(2);
  }
  const rounds = Number(values.rounds);
  if (!Number.isInteger(rounds) || rounds < 1) {
    console.error("bench:overhead: --rounds must be an integer >= 1");
    process.exit(2);
  }
  const warmup = Math.max(100, Math.floor(requests / 5));
  const machine = `${os.cpus().length} × ${os.cpus()[0]?.model ?? "cpu"}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, ${os.platform()} ${os.release()}`;
  console.log(
    `bench:overhead — ${new Date().toISOString()} — node ${process.version} — ${machine}`,
  );

  // Worker and router each in a process of their own; this process is the load client.
  const host = await childFleetHost();
  const fleet = await host.startFleet({
    count: 1,
    worker: { timeScale: 0, kvCapacityTokens: 2_000_000 },
  });
  const workerUrl = fleet.workers[0]!.url;
  const router = await startBuiltRouter(
    ["--worker-urls", workerUrl, ...routerArgs],
    cpuProfDir === undefined ? [] : ["--cpu-prof", `--cpu-prof-dir=${cpuProfDir}`],
  );
  const nginx: NginxProxy | undefined = await startNginx(workerUrl);
  console.log(nginx === undefined ? "nginx: not installed, no baseline" : `nginx: ${nginx.url}`);
  // --data-plane nginx, when nginx has its njs module; CPU = the router's and nginx's processes.
  const routerNginx =
    nginx === undefined || !hasNjs()
      ? undefined
      : await startBuiltRouter(
          [
            "--data-plane",
            "nginx",
            "--nginx-binary",
            findNginx() ?? "nginx",
            "--worker-urls",
            workerUrl,
            ...routerArgs,
          ],
          cpuProfDir === undefined ? [] : ["--cpu-prof", `--cpu-prof-dir=${cpuProfDir}`],
        );
  const routerNginxTarget =
    routerNginx === undefined
      ? undefined
      : { url: routerNginx.url, pid: () => processTree(routerNginx.pid) };
  const floor =
    routerNginx === undefined
      ? undefined
      : await startNginxFloor(findNginx() ?? "nginx", [workerUrl]);
  const floorTarget = floor === undefined ? undefined : { url: floor.url, pid: () => floor.pids() };
  const bareNode = await startBareNodeProxy(workerUrl);
  const origins = [
    workerUrl,
    router.url,
    bareNode.url,
    ...(nginx === undefined ? [] : [nginx.url]),
    ...(routerNginx === undefined ? [] : [routerNginx.url]),
    ...(floor === undefined ? [] : [floor.url]),
  ];
  const cells: CellResult[] = [];
  const texts = new Map(promptSizes.map((chars) => [chars, overheadPrompts(chars)]));
  try {
    // Warm every code path of the client, the router and the worker before any measurement
    // (the JIT needs thousands of requests, more than a cell's own warm-up).
    for (const chars of promptSizes) {
      for (const stream of streams) {
        for (const origin of origins) {
          await measure(origin, texts.get(chars)!, stream, 16, warmup * 2, 0, "warm-up");
        }
      }
    }
    for (const chars of promptSizes) {
      const texts = overheadPrompts(chars);
      for (const stream of streams) {
        for (const concurrency of concurrencies) {
          const label = `${chars} chars ${stream ? "stream" : "json"} c=${concurrency}`;
          const targets: [string, Target | undefined][] = [
            ["direct", workerUrl],
            ["router", router],
            ["bare node", bareNode],
            [
              "nginx",
              nginx === undefined ? undefined : { url: nginx.url, pid: nginx.workerPid() ?? -1 },
            ],
            ["router-nginx", routerNginxTarget],
            ["nginx floor", floorTarget],
          ];
          const measured = await measureRounds(targets, rounds, (target, name) =>
            measure(target, texts, stream, concurrency, requests, warmup, `${label} ${name}`),
          );
          const direct = measured.result("direct")!;
          const routed = measured.result("router")!;
          const viaBareNode = measured.result("bare node")!;
          const viaNginx = measured.result("nginx");
          const viaRouterNginx = measured.result("router-nginx");
          const viaFloor = measured.result("nginx floor");
          cells.push({
            promptChars: chars,
            stream,
            concurrency,
            direct,
            router: routed,
            addedP50Ms: measured.addedP50("router"),
            addedP99Ms: routed.latencyMs.p99 - direct.latencyMs.p99,
            throughputRatio: routed.requestsPerSec / direct.requestsPerSec,
            bareNode: viaBareNode,
            bareNodeAddedP50Ms: measured.addedP50("bare node"),
            ...(viaNginx === undefined
              ? {}
              : {
                  nginx: viaNginx,
                  nginxAddedP50Ms: measured.addedP50("nginx"),
                  routerVsNginx: routed.requestsPerSec / viaNginx.requestsPerSec,
                  bareNodeVsNginx: viaBareNode.requestsPerSec / viaNginx.requestsPerSec,
                }),
            ...(viaRouterNginx === undefined || viaNginx === undefined
              ? {}
              : {
                  routerNginx: viaRouterNginx,
                  routerNginxAddedP50Ms: measured.addedP50("router-nginx"),
                  routerNginxVsNginx: viaRouterNginx.requestsPerSec / viaNginx.requestsPerSec,
                }),
            ...(viaFloor === undefined || viaNginx === undefined
              ? {}
              : {
                  floor: viaFloor,
                  floorAddedP50Ms: measured.addedP50("nginx floor"),
                  floorVsNginx: viaFloor.requestsPerSec / viaNginx.requestsPerSec,
                }),
          });
        }
      }
    }
  } finally {
    await router.stop();
    await bareNode.stop();
    await nginx?.stop();
    await routerNginx?.stop();
    await floor?.stop();
    await host.close();
  }

  console.log(
    `\n${requests} measured requests per cell and target${rounds > 1 ? ` in each of ${rounds} interleaved rounds (medians over rounds; added p50 against each round's direct run)` : ""} (after ${warmup} warm-up), ${OUTPUT_TOKENS} output tokens, ` +
      "latency = request sent → response complete, at the client",
  );
  printTable(
    [
      "prompt",
      "mode",
      "conc",
      "direct p50",
      "direct p99",
      "router p50",
      "router p99",
      "added p50",
      "added p99",
      "direct req/s",
      "router req/s",
      "ratio",
      "router cpu µs/req",
      "node cpu µs/req",
      "node added p50",
      "node req/s",
      ...(nginx === undefined
        ? []
        : [
            "nginx p50",
            "nginx added p50",
            "nginx req/s",
            "nginx cpu µs/req",
            "router/nginx",
            "node/nginx",
          ]),
      ...(routerNginx === undefined
        ? []
        : [
            "r-nginx added p50",
            "r-nginx req/s",
            "r-nginx cpu µs/req",
            "of it radixgate",
            "r-nginx/nginx",
          ]),
      ...(floor === undefined
        ? []
        : ["floor added p50", "floor req/s", "floor cpu µs/req", "of it node", "floor/nginx"]),
      "errors",
    ],
    cells.map((c) => [
      `${c.promptChars / 1024}k`,
      c.stream ? "stream" : "json",
      c.concurrency,
      fmt(c.direct.latencyMs.p50, 2),
      fmt(c.direct.latencyMs.p99, 2),
      fmt(c.router.latencyMs.p50, 2),
      fmt(c.router.latencyMs.p99, 2),
      fmt(c.addedP50Ms, 2),
      fmt(c.addedP99Ms, 2),
      fmt(c.direct.requestsPerSec, 0),
      fmt(c.router.requestsPerSec, 0),
      fmt(c.throughputRatio, 2),
      fmt(c.router.cpuMicrosPerRequest ?? Number.NaN, 0),
      fmt(c.bareNode!.cpuMicrosPerRequest ?? Number.NaN, 0),
      fmt(c.bareNodeAddedP50Ms!, 2),
      fmt(c.bareNode!.requestsPerSec, 0),
      ...(c.nginx === undefined
        ? []
        : [
            fmt(c.nginx.latencyMs.p50, 2),
            fmt(c.nginxAddedP50Ms!, 2),
            fmt(c.nginx.requestsPerSec, 0),
            fmt(c.nginx.cpuMicrosPerRequest ?? Number.NaN, 0),
            fmt(c.routerVsNginx!, 2),
            fmt(c.bareNodeVsNginx!, 2),
          ]),
      ...(c.routerNginx === undefined
        ? []
        : nginxPlaneColumns(c.routerNginx, c.routerNginxAddedP50Ms!, c.routerNginxVsNginx!)),
      ...(c.floor === undefined
        ? []
        : nginxPlaneColumns(c.floor, c.floorAddedP50Ms!, c.floorVsNginx!)),
      c.direct.errors +
        c.router.errors +
        c.bareNode!.errors +
        (c.nginx?.errors ?? 0) +
        (c.routerNginx?.errors ?? 0) +
        (c.floor?.errors ?? 0),
    ]),
  );
  mkdirSync(dirname(RESULTS), { recursive: true });
  writeFileSync(
    RESULTS,
    `${JSON.stringify(
      {
        benchmark: "overhead",
        date: new Date().toISOString(),
        node: process.version,
        machine,
        command: commandLine("bench:overhead"),
        requestsPerCell: requests,
        rounds,
        warmupPerCell: warmup,
        outputTokens: OUTPUT_TOKENS,
        cells,
      },
      null,
      2,
    )}\n`,
  );
  console.log(`\nresults: ${RESULTS}`);
}

runIfEntryPoint(import.meta.url, main);
