/**
 * Routing quality: the same seeded workload through the real router once per policy (and once
 * pinned by an oracle), each on a fresh fleet of simulated workers, compared on the fleet's
 * prefix-cache hit rate (the workers' own counters), client-side TTFT and end-to-end latency,
 * throughput and spread of requests over the workers.
 *
 *   npm run bench:routing                         every workload, default preset, 5 repeats
 *                                                 (about half an hour on 2 cores)
 *   npm run bench:routing -- --workload cache-pressure --policies prefix_cost   one workload, one
 *                                                 policy and the oracle, 5 repeats (about 2 minutes)
 *   npm run bench:routing -- --quick              small preset, one run of the rows the goal lines
 *                                                 read (--repeats, --policies for more)
 *   npm run bench:routing -- --workload multi-turn --concurrency 64
 *   npm run bench:routing -- --rate 40            open loop, Poisson arrivals at 40 req/s
 *
 * Prints a table per workload, writes bench/results/routing-<workload>[-<tag>].json, and (for the
 * default preset over every workload) docs/chart-routing.svg.
 */
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import os from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { startLocalRedis } from "../sim/redis-server.js";
import { defaultConfig } from "../src/config.js";
import { PREFIX_INDEX_NAMES, type PrefixIndexName } from "../src/index/factory.js";
import { POLICY_NAMES, type PolicyName } from "../src/scheduling/policy.js";
import { startCpuNoise } from "./lib/cpu-noise.js";
import { commandLine, runIfEntryPoint } from "./lib/entry.js";
import { childFleetHost, type FleetHost, inlineFleetHost } from "./lib/fleet.js";
import { fmt } from "./lib/latency.js";
import { type MatrixSeries, matrixChartSvg } from "./lib/matrix-chart.js";
import { numberFlag } from "./lib/number-flag.js";
import { pdMain } from "./lib/pd-workload.js";
import { ProgressBar } from "./lib/progress.js";
import { printAccountTable } from "./lib/routing-account.js";
import { routingChartSvg } from "./lib/routing-chart.js";
import { diagnosisLines } from "./lib/routing-diagnosis.js";
import {
  type CellSummary,
  cellPreset,
  deviationLines,
  MATRIX_CELLS,
  type MatrixCell,
  matrixGoalLines,
  printMatrix,
  QUICK_MATRIX_CELLS,
  replayCell,
  summarizeCell,
} from "./lib/routing-matrix.js";
import {
  ALL_ROWS,
  BYPASS_TARGETS,
  type BypassTarget,
  bucketQuantileMs,
  ORACLE_ROW,
  PRECISE_ROW,
  type RowLabel,
  type RowResult,
  runRoutingWorkload,
  WARM_SKIP,
  type WorkloadReport,
} from "./lib/routing-runner.js";
import { decomposeSwings, printSwings, type SwingDecomposition } from "./lib/routing-swings.js";
import { parseRowLabel, ROW_KNOBS } from "./lib/routing-variants.js";
import {
  FULL_PRESET,
  OPT_IN_WORKLOADS,
  QUICK_PRESET,
  type RoutingPreset,
  WORKLOADS,
  type WorkloadName,
} from "./lib/routing-workloads.js";
import { printTable } from "./lib/stats.js";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const RESULTS_DIR = join(ROOT, "bench", "results");
const CHART_PATH = join(ROOT, "docs", "chart-routing.svg");
const MATRIX_CHART_PATH = join(ROOT, "docs", "chart-matrix.svg");
const MATRIX_RESULT = join(RESULTS_DIR, "routing-matrix.json");
const REPLAY_RESULT = join(RESULTS_DIR, "routing-matrix-replay.json");

/**
 * docs/chart-matrix.svg from the latest default matrix runs, real time and model-time replay
 * (each default run rewrites it, with whichever of the two exists).
 */
export function writeMatrixChart(): void {
  const series: MatrixSeries[] = [];
  const caption: string[] = [];
  for (const [path, name] of [
    [MATRIX_RESULT, "real time"],
    [REPLAY_RESULT, "model-time replay"],
  ] as const) {
    try {
      const saved = JSON.parse(readFileSync(path, "utf8")) as {
        date: string;
        command: string;
        loadAverage?: number[];
        report: { summaries: CellSummary[] };
      };
      const loads = saved.report.summaries.map((x) => x.loadAverage);
      const load =
        name === "real time" && loads.length > 0
          ? ` (load ${fmt(Math.min(...loads.map((l) => l.min)), 0)}-${fmt(Math.max(...loads.map((l) => l.max)), 0)})`
          : "";
      series.push({ name: `${name}${load}`, summaries: saved.report.summaries });
      caption.push(`${saved.command} ${saved.date.slice(0, 16)}`);
    } catch {
      // not run yet
    }
  }
  if (series.length === 0) return;
  writeFileSync(
    MATRIX_CHART_PATH,
    matrixChartSvg(series, `${caption.join("; ")}; default vs oracle`),
  );
  console.log(`chart: ${MATRIX_CHART_PATH}`);
}

interface CliOptions {
  workloads: WorkloadName[];
  preset: RoutingPreset;
  rows: RowLabel[];
  repeats: number;
  timingSeed: number;
  rate: number | undefined;
  bypassShare: number | undefined;
  bypassTo: BypassTarget | undefined;
  cacheLoadBound: number | undefined;
  prefixIndex: PrefixIndexName | undefined;
  maxTreeSize: number | undefined;
  prefixCostQueueWeight: number | undefined;
  prefixCostRequestChars: number | undefined;
  precisePolicy: PolicyName | undefined;
  /** Who relays the answers: the router itself (node, the default) or the nginx it starts. */
  dataPlane: "node" | "nginx" | undefined;
  replicas: number | undefined;
  sharedState: boolean;
  /** --replica-delay-ms: with --replay --replicas N --shared-state, an op's and a claim leg's latency (real ms). */
  replicaDelayMs: number;
  diagnose: boolean;
  decisionTraceDir: string | undefined;
  isolate: boolean;
  /** Run the tenants family over the matrix's cells (routing-matrix.ts). */
  matrix: boolean;
  cpuNoise: boolean;
  replay: boolean;
  /** --cells: the matrix's cells to run (all when undefined). */
  cells: string[] | undefined;
  /** --jitter: with --replay, the share by which engine steps run faster or slower (0 = none). */
  jitter: number;
  /** --swings: with --replay --jitter, decompose each router row's spread (routing-swings.ts). */
  swings: boolean;
  /** --seeds: with --replay --jitter, the workload seeds to run the matrix on (else --seed alone). */
  seeds: number[] | undefined;
  /** "" for the default preset without overrides; else a file-name suffix. */
  tag: string;
  chart: boolean;
}

function parseCli(argv: string[]): CliOptions {
  const { values } = parseArgs({
    args: argv,
    options: {
      workload: { type: "string", default: "all" },
      quick: { type: "boolean", default: false },
      concurrency: { type: "string" },
      rate: { type: "string" },
      workers: { type: "string" },
      "time-scale": { type: "string" },
      jitter: { type: "string" },
      seeds: { type: "string" },
      cells: { type: "string" },
      "kv-capacity-tokens": { type: "string" },
      seed: { type: "string" },
      tenants: { type: "string" },
      "kv-share": { type: "string" },
      zipf: { type: "string" },
      "preamble-tokens": { type: "string" },
      "tenant-prompt-tokens": { type: "string" },
      conversations: { type: "string" },
      turns: { type: "string" },
      matrix: { type: "boolean", default: false },
      "cpu-noise": { type: "boolean", default: false },
      replay: { type: "boolean", default: false },
      swings: { type: "boolean", default: false },
      "cache-load-bound": { type: "string" },
      "prefix-index": { type: "string" },
      "max-tree-size": { type: "string" },
      "prefix-cost-queue-weight": { type: "string" },
      "prefix-cost-request-chars": { type: "string" },
      policies: { type: "string" },
      repeats: { type: "string" },
      "timing-seed": { type: "string" },
      bypass: { type: "string" },
      "bypass-to": { type: "string" },
      "precise-policy": { type: "string" },
      "data-plane": { type: "string" },
      replicas: { type: "string" },
      "shared-state": { type: "boolean", default: false },
      "replica-delay-ms": { type: "string" },
      diagnose: { type: "boolean", default: false },
      "decision-trace": { type: "string" },
      "no-oracle": { type: "boolean", default: false },
      "no-isolate": { type: "boolean", default: false },
      "no-chart": { type: "boolean", default: false },
      help: { type: "boolean", default: false },
    },
  });
  if (values.help) {
    console.log(
      [
        "usage: npm run bench:routing -- [options]",
        `  --workload <all|${WORKLOADS.join("|")}|pd>  (default all but ${OPT_IN_WORKLOADS.join(", ")}; pd: a prefill/decode fleet,`,
        "                                prefill policies side by side: bench/lib/pd-workload.ts)",
        "  --quick                       small preset, one repeat, each row warmed once, the rows the goals read:",
        `                                ${QUICK_ROWS.join(", ")} (--policies for others)`,
        "  --concurrency <n>             closed loop: requests outstanding (default 32; quick 16)",
        "  --rate <req/s>                open loop: Poisson arrivals instead of the closed loop",
        "  --workers <n>                 simulated workers (default 4)",
        "  --time-scale <x>              real ms per model ms of the workers (default 0.5; quick 0.1)",
        "  --kv-capacity-tokens <n>      KV cache per worker (default 48000; quick 12000; cache-pressure",
        "                                sizes its own: a share of its working set)",
        "  --seed <n>                    workload seed (default 42)",
        "  --tenants <n>                 cache-pressure, tenants: tenants (default 64 / 16; quick 24 / 16)",
        "  --kv-share <x>                KV as a share of the working set: cache-pressure, each worker's",
        "                                (default 0.22); tenants, the fleet's (default 0.3; quick 0.6),",
        "                                with chats added where a worker would not hold 1.25 requests",
        "  --zipf <s>, --preamble-tokens <n>, --tenant-prompt-tokens <min-max>, --conversations <n>,",
        "  --turns <n>                   tenants: popularity skew, shared preamble, each tenant's own",
        "                                prompt length range, chats, turns a chat (one client per chat",
        "                                under way: --concurrency)",
        "  --matrix                      the tenants family over a grid of cells (bench/lib/routing-matrix.ts;",
        "                                --quick: 3 cells), the default policy and the oracle unless",
        "                                --policies; a summary line per cell, bench/results/routing-matrix*.json",
        "  --cells <a,b>                 with --matrix: only these cells (e.g. base,zipf-0.6), to split a long run",
        "  --cpu-noise                   a neighbour process burns a core in random bursts during the run",
        "  --replay                      with --matrix: each cell in model time (bench/lib/ttft-replay.ts),",
        "                                repeat i on workload seed + i and its own engine-poll phase;",
        "                                reproducible, no CPU noise; TTFT in model ms; each row's line gives",
        "                                its spread and the repeats' standard deviation (sd), in points",
        "  --jitter <share>              with --replay: every repeat on the one workload seed, each engine",
        "                                step 1 ± share of its model time (seeded by --timing-seed + i):",
        "                                identical runs' timing noise, reproducibly (e.g. 0.2)",
        "  --swings                      with --replay --jitter: where each router row's spread comes from",
        "                                (bench/lib/routing-swings.ts): every run's decisions replayed under",
        "                                every timing seed, and its first placements frozen",
        "  --seeds <a,b>                 with --replay --jitter: the matrix on each workload seed in turn (cells",
        "                                named cell@seed), then each router row's deviation over every cell and",
        "                                seed: mean and largest sd, cells over 0.43 (the spread goal's), mean hit,",
        "                                lowest worst ÷ oracle, highest TTFT ÷ oracle: one line to compare rules",
        "  --bypass <share>              share of requests sent straight to a worker, bypassing the router",
        "                                (e.g. 0.25; the precise row sees them through the KV events)",
        `  --bypass-to <${BYPASS_TARGETS.join("|")}>  where the bypassing client sends them (default sticky):`,
        "                                the oracle's worker for the request's group; each group to a",
        "                                worker of the client's own choosing (a hash the routers and the",
        "                                oracle do not know); or each request to a worker by a hash of its id",
        "  --cache-load-bound <x>        the router's --cache-load-bound (default: the router's, 2)",
        `  --prefix-index <name>         the router's --prefix-index (${PREFIX_INDEX_NAMES.join("|")}; default: the router's)`,
        "  --max-tree-size <chars>       the router's --max-tree-size (default: the router's)",
        "  --prefix-cost-queue-weight <x>, --prefix-cost-request-chars <n>   prefix_cost's weights",
        `  --policies <a,b>              subset of ${POLICY_NAMES.join(",")},${PRECISE_ROW}; a router row may`,
        "                                carry knobs that switch a source of variance off, as <row>:<knob>+<knob>",
        `                                (${ROW_KNOBS.join(", ")}; bench/lib/routing-variants.ts)`,
        `  --repeats <n>                 runs of every row, interleaved, same requests (default ${DEFAULT_REPEATS}; quick 1)`,
        "  --timing-seed <n>             the first repeat's timing seed (default 1; repeat i uses n + i):",
        "                                where the routers' engine polls fall in the run",
        "  --replicas <n>                router replicas per router row, no shared state, the requests",
        "                                split between them by id (the precise row: each subscribed to",
        "                                every worker's KV events); default 1",
        "  --shared-state                with --replicas: the replicas share state through a local",
        "                                redis-server (--state-url), a key prefix per row; with --replay,",
        "                                modeled in model time (bench/lib/ttft-replay.ts ReplicaModel)",
        "  --replica-delay-ms <ms>       with --replay --replicas n --shared-state: how long an op, a load",
        "                                report and each leg of a claim take to reach a peer (real ms; default 2; 0: at once)",
        "  --precise-policy <name>       the precise row's policy (default: the router's default)",
        "  --data-plane <node|nginx>     who relays the answers in every row (default node; nginx needs",
        "                                nginx and its njs module): the hit rate of both, side by side",
        "  --decision-trace <dir>        each router's decision trace, one file per row, repeat and replica",
        "                                (<workload>-<row>-t<seed>-r<replica>.jsonl): npm run trace:explain",
        "  --diagnose                    tally where each router row's decisions lose cached tokens",
        "                                (index or policy; bench/lib/routing-diagnosis.ts); implies --no-isolate",
        "  --no-oracle                   skip the oracle_sticky row",
        "  --no-isolate                  run the workers in this process (default: a child process)",
        "  --no-chart                    do not rewrite docs/chart-routing.svg",
        "Columns: hit rate = Σ cached / Σ prompt tokens over the workers' own counters, mean over the",
        "repeats, with the worst repeat and the spread (max − min, points); TTFT = time to the first",
        "streamed content chunk at the client, mean over every repeat's requests, with the best and",
        `worst repeat's mean; warm mean = TTFT mean without the first ${WARM_SKIP * 100}% of requests of each repeat`,
        "(cold start); loop = busy share of the router + client event loop; requests per worker per repeat.",
      ].join("\n"),
    );
    process.exit(0);
  }
  const preset: RoutingPreset = structuredClone(values.quick ? QUICK_PRESET : FULL_PRESET);
  let overridden = false;
  const num = (flag: string, raw: string | undefined, min: number, integer: boolean) => {
    const v = numberFlag(flag, raw, min, integer);
    if (v !== undefined) overridden = true;
    return v;
  };
  preset.concurrency = num("concurrency", values.concurrency, 1, true) ?? preset.concurrency;
  // The tenants family has its own clients (8); an explicit --concurrency sets them too.
  if (values.concurrency !== undefined) preset.tenants.clients = preset.concurrency;
  preset.workers = num("workers", values.workers, 1, true) ?? preset.workers;
  preset.timeScale = num("time-scale", values["time-scale"], 0, false) ?? preset.timeScale;
  preset.kvCapacityTokens =
    num("kv-capacity-tokens", values["kv-capacity-tokens"], 16, true) ?? preset.kvCapacityTokens;
  preset.seed = num("seed", values.seed, 0, true) ?? preset.seed;
  // --tenants and --kv-share shape both tenant workloads.
  const tenants = preset.tenants;
  const tenantCount = num("tenants", values.tenants, 1, true);
  if (tenantCount !== undefined) {
    preset.cachePressure.tenants = tenantCount;
    tenants.tenants = tenantCount;
  }
  const kvShare = num("kv-share", values["kv-share"], Number.MIN_VALUE, false);
  if (kvShare !== undefined) {
    preset.cachePressure.kvShareOfWorkingSet = kvShare;
    tenants.fleetKvShare = kvShare;
  }
  tenants.zipfExponent = num("zipf", values.zipf, 0, false) ?? tenants.zipfExponent;
  tenants.toolPreambleTokens =
    num("preamble-tokens", values["preamble-tokens"], 1, true) ?? tenants.toolPreambleTokens;
  tenants.conversations =
    num("conversations", values.conversations, 1, true) ?? tenants.conversations;
  tenants.turns = num("turns", values.turns, 1, true) ?? tenants.turns;
  const promptRange = values["tenant-prompt-tokens"];
  if (promptRange !== undefined) {
    const [lo, hi = lo] = promptRange.split("-");
    tenants.tenantPromptMinTokens = num("tenant-prompt-tokens", lo, 1, true)!;
    tenants.tenantPromptMaxTokens = num("tenant-prompt-tokens", hi, 1, true)!;
    if (tenants.tenantPromptMaxTokens < tenants.tenantPromptMinTokens) {
      throw new Error("--tenant-prompt-tokens: <min-max> with min ≤ max");
    }
  }
  const rate = num("rate", values.rate, Number.MIN_VALUE, false);
  const cacheLoadBound = num("cache-load-bound", values["cache-load-bound"], 0, false);
  const prefixIndex = values["prefix-index"] as PrefixIndexName | undefined;
  if (prefixIndex !== undefined) {
    if (!PREFIX_INDEX_NAMES.includes(prefixIndex)) {
      throw new Error(`--prefix-index must be one of ${PREFIX_INDEX_NAMES.join(", ")}`);
    }
    overridden = true;
  }
  const maxTreeSize = num("max-tree-size", values["max-tree-size"], 1, true);
  const queueWeight = num("prefix-cost-queue-weight", values["prefix-cost-queue-weight"], 0, false);
  const requestChars = num(
    "prefix-cost-request-chars",
    values["prefix-cost-request-chars"],
    0,
    false,
  );

  const workloads: WorkloadName[] =
    values.workload === "all"
      ? WORKLOADS.filter((w) => !OPT_IN_WORKLOADS.includes(w))
      : values.workload.split(",").map((w) => {
          if (!(WORKLOADS as readonly string[]).includes(w)) {
            throw new Error(`--workload: unknown workload "${w}"; expected all or ${WORKLOADS}`);
          }
          return w as WorkloadName;
        });
  // The matrix compares the default with the oracle unless told otherwise; --quick runs the rows
  // its goal lines read (a row costs a fresh fleet and router, most of a quick run's time).
  let rows: RowLabel[] = values.matrix
    ? [defaultConfig().policies.policy, ORACLE_ROW]
    : values.quick
      ? [...QUICK_ROWS]
      : [...ALL_ROWS];
  if (values.policies !== undefined) {
    overridden = true;
    rows = values.policies.split(",").map((label) => {
      const { base: p } = parseRowLabel(label);
      if (!(POLICY_NAMES as readonly string[]).includes(p) && p !== PRECISE_ROW) {
        throw new Error(
          `--policies: unknown policy "${p}"; expected ${POLICY_NAMES} or ${PRECISE_ROW}`,
        );
      }
      return label as RowLabel;
    });
    if (!values["no-oracle"]) rows.push(ORACLE_ROW);
  }
  // --quick is a smoke run: one repeat unless asked (five made it take minutes, not seconds).
  const presetRepeats = values.quick ? 1 : DEFAULT_REPEATS;
  const repeats = num("repeats", values.repeats, 1, true) ?? presetRepeats;
  if (repeats !== presetRepeats) overridden = true;
  const timingSeed = num("timing-seed", values["timing-seed"], 0, true) ?? 1;
  if (values["no-oracle"]) rows = rows.filter((r) => r !== ORACLE_ROW);
  const bypassShare = num("bypass", values.bypass, 0, false);
  if (bypassShare !== undefined) {
    if (bypassShare > 1) throw new Error("--bypass must be a share in [0, 1]");
    overridden = true;
  }
  const bypassTo = values["bypass-to"] as BypassTarget | undefined;
  if (bypassTo !== undefined) {
    if (!BYPASS_TARGETS.includes(bypassTo)) {
      throw new Error(`--bypass-to must be one of ${BYPASS_TARGETS.join(", ")}`);
    }
    if (bypassShare === undefined || bypassShare === 0) {
      throw new Error("--bypass-to needs --bypass <share> above 0");
    }
    overridden = true;
  }
  const replicas = num("replicas", values.replicas, 1, true);
  const sharedState = values["shared-state"];
  if (sharedState) {
    if (replicas === undefined || replicas < 2) {
      throw new Error("--shared-state needs --replicas 2 or more");
    }
    overridden = true;
  }
  const precisePolicy = values["precise-policy"] as PolicyName | undefined;
  if (precisePolicy !== undefined) {
    if (!POLICY_NAMES.includes(precisePolicy)) {
      throw new Error(`--precise-policy must be one of ${POLICY_NAMES.join(", ")}`);
    }
    overridden = true;
  }
  const dataPlane = values["data-plane"];
  if (dataPlane !== undefined) {
    if (dataPlane !== "node" && dataPlane !== "nginx")
      throw new Error("--data-plane must be node or nginx");
    overridden = true;
  }
  if (values.swings && !(values.matrix && values.replay && values.jitter !== undefined)) {
    throw new Error("--swings needs --matrix --replay --jitter <share>");
  }
  let seeds: number[] | undefined;
  if (values.seeds !== undefined) {
    if (!(values.matrix && values.replay && values.jitter !== undefined)) {
      throw new Error("--seeds needs --matrix --replay --jitter <share>");
    }
    if (values.swings) throw new Error("--swings takes one workload seed (--seed), not --seeds");
    seeds = values.seeds.split(",").map((s) => num("seeds", s.trim(), 0, true) ?? Number.NaN);
  }
  // A subset of the matrix's cells is not the matrix: its results go to a file of their own.
  if (values.cells !== undefined) overridden = true;
  const tag = [values.quick ? "quick" : "", overridden ? "custom" : ""].filter(Boolean).join("-");
  return {
    workloads,
    preset,
    rows,
    repeats,
    timingSeed,
    rate,
    bypassShare,
    bypassTo,
    cacheLoadBound,
    prefixIndex,
    maxTreeSize,
    prefixCostQueueWeight: queueWeight,
    prefixCostRequestChars: requestChars,
    precisePolicy,
    dataPlane,
    replicas,
    sharedState,
    replicaDelayMs: num("replica-delay-ms", values["replica-delay-ms"], 0, false) ?? 2,
    diagnose: values.diagnose,
    decisionTraceDir: values["decision-trace"],
    isolate: !values["no-isolate"] && !values.diagnose,
    matrix: values.matrix,
    cpuNoise: values["cpu-noise"],
    replay: values.replay,
    jitter: num("jitter", values.jitter, 0, false) ?? 0,
    swings: values.swings,
    seeds,
    cells: values.cells?.split(",").filter(Boolean),
    tag,
    chart: !values["no-chart"] && tag === "" && !values.matrix && !values["cpu-noise"],
  };
}

/**
 * --quick's rows: the default, SGLang's cache_aware, the load-only baselines its goal lines compare
 * with, precise and the oracle; each row's figures as in a run of every row.
 */
const QUICK_ROWS: readonly RowLabel[] = [
  "prefix_cost",
  "cache_aware",
  "round_robin",
  "least_load",
  PRECISE_ROW,
  ORACLE_ROW,
];

/** Runs of every row unless --repeats says otherwise (issue 27). */
const DEFAULT_REPEATS = 5;

function pct(x: number): string {
  return `${(x * 100).toFixed(1)}%`;
}

/** A spread of hit rates, in points. */
function points(x: number): string {
  return (x * 100).toFixed(1);
}

function printReport(report: WorkloadReport): void {
  console.log(`\n## ${report.workload}: ${report.description}`);
  console.log(
    `${report.requests} requests, ${report.arrival}, ${report.replicas > 1 ? `${report.replicas} router replicas (${report.sharedState ? "shared state through Redis" : "no shared state"}), ` : ""}` +
      `${report.bypassShare > 0 ? `${pct(report.bypassShare)} bypassing the router (--bypass-to ${report.bypassTo}), ` : ""}${report.preset.workers} workers × ` +
      `${report.kvCapacityTokens} KV tokens, working set ${report.workingSetTokens} tokens, ` +
      `timeScale ${report.preset.timeScale}`,
  );
  const loads = report.rows.flatMap((r) => (r.repeats ?? []).map((x) => x.loadAverage));
  if (loads.length > 0) {
    console.log(
      `${report.rows[0]?.repeats?.length ?? 1} repeats, interleaved; load average (1 min) ${fmt(Math.min(...loads), 2)}-${fmt(Math.max(...loads), 2)}`,
    );
  }
  printTable(
    [
      "policy",
      "hit rate",
      "hit min",
      "hit spread",
      "TTFT mean",
      "TTFT min",
      "TTFT max",
      "p50",
      "p90",
      "p99",
      "warm mean",
      "e2e mean",
      "e2e p99",
      "req/s",
      "out tok/s",
      "errors",
      "loop",
      "requests per worker",
    ],
    report.rows.map((r) => [
      r.row,
      pct(r.hitRate),
      pct(r.spread?.hitRate.min ?? r.hitRate),
      points(r.spread?.hitRate.spread ?? 0),
      fmt(r.ttftMs.mean),
      fmt(r.spread?.ttftMeanMs.min ?? r.ttftMs.mean),
      fmt(r.spread?.ttftMeanMs.max ?? r.ttftMs.mean),
      fmt(r.ttftMs.p50),
      fmt(r.ttftMs.p90),
      fmt(r.ttftMs.p99),
      fmt(r.warmTtftMs.mean),
      fmt(r.e2eMs.mean),
      fmt(r.e2eMs.p99),
      fmt(r.requestsPerSec),
      fmt(r.outputTokensPerSec, 0),
      r.errors,
      pct(r.loopUtilization),
      Object.values(r.perWorker).join("/"),
    ]),
  );
  printAccountTable(report.rows);
  for (const r of report.rows) {
    if (r.firstError !== undefined) console.log(`  ${r.row}: first error: ${r.firstError}`);
  }
  for (const r of report.rows) {
    if (r.split !== undefined) {
      console.log(
        `  ${r.row}: hit rate of the routed requests ${pct(r.split.routedHitRate)}, of the bypassing ones ${pct(r.split.bypassHitRate)}`,
      );
    }
    if (r.mediaFalseHits !== undefined) {
      const m = r.mediaFalseHits;
      console.log(
        `  ${r.row}: ${m.imageDecisions} decisions for requests with an image, ${m.claimed} routed on a match into the image message, ${m.falseHits} false hits (the worker never got that image)`,
      );
    }
    if (r.diagnosis !== undefined)
      for (const line of diagnosisLines(r.row, r.diagnosis)) console.log(line);
    if (r.sharing !== undefined) {
      const s = r.sharing;
      const lag = (seconds: number, n: number, buckets: Record<string, number>) => {
        if (n === 0) return "none";
        const q = (x: number) => fmt(bucketQuantileMs(buckets, x) ?? Number.NaN, 1);
        return `mean ${fmt((seconds * 1000) / n, 2)} ms, p50 ≤ ${q(0.5)}, p90 ≤ ${q(0.9)} ms (${n})`;
      };
      console.log(
        `  ${r.row}: replicas' shared state (what the replay's --replica-delay-ms models): claim round trip ${lag(s.claimSeconds, s.claims, s.claimBuckets)}; a peer's decision applied after ${lag(s.opDelaySeconds, s.ops, s.opBuckets)}${s.relayed + s.relayFallbacks > 0 ? `; relayed to the leader ${s.relayed}, fell back to a claim ${s.relayFallbacks}` : ""}`,
      );
    }
  }
  for (const line of goalLines(report)) console.log(line);
}

/** The goals the benchmark checks, as report lines (never hidden when missed). */
export function goalLines(report: WorkloadReport): string[] {
  const row = (name: RowLabel): RowResult | undefined => report.rows.find((r) => r.row === name);
  const ca = row("cache_aware");
  const lines: string[] = [];
  const oracle = row(ORACLE_ROW);
  const precise = row(PRECISE_ROW);
  // Issue 9: where the approximate trees lose (bypass traffic, replicas), precise holds the oracle.
  if (
    precise !== undefined &&
    oracle !== undefined &&
    (report.bypassShare > 0 || report.replicas > 1)
  ) {
    const ok = precise.hitRate >= oracle.hitRate;
    lines.push(
      `goal: precise hit rate ≥ the oracle's: ${pct(precise.hitRate)} vs ${pct(oracle.hitRate)} → ${ok ? "met" : "MISSED"}` +
        (report.bypassShare > 0 && report.bypassTo !== undefined
          ? ` [--bypass-to ${report.bypassTo}]`
          : "") +
        (precise.split === undefined
          ? ""
          : ` (routed requests ${pct(precise.split.routedHitRate)} vs ${pct(oracle.split?.routedHitRate ?? 0)})`),
    );
  }
  if (report.workload === "offload") {
    // Offloaded KV tiers: crediting CPU-held prefixes against the GPU cache alone, same engines.
    const aware = row(PRECISE_ROW);
    const blind = row(`${PRECISE_ROW}:tier-blind`);
    if (aware !== undefined && blind !== undefined) {
      const ratio = aware.ttftMs.mean / blind.ttftMs.mean;
      lines.push(
        `goal: tier-aware mean TTFT ≤ 0.85× tier-blind: ${fmt(aware.ttftMs.mean)} vs ${fmt(blind.ttftMs.mean)} ms (${fmt(ratio, 2)}×) → ${ratio <= 0.85 ? "met" : "MISSED"}` +
          ` (hit rate ${pct(aware.hitRate)} vs ${pct(blind.hitRate)}; warm mean ${fmt(aware.warmTtftMs.mean / blind.warmTtftMs.mean, 2)}×)`,
      );
    }
  }
  if (report.workload === "multimodal") {
    // Images in the prefix: no claim on an image a worker never got, and the oracle's hit rate.
    for (const r of report.rows) {
      if (r.mediaFalseHits === undefined) continue;
      const points = oracle === undefined ? 0 : 100 * (oracle.hitRate - r.hitRate);
      const ok = r.mediaFalseHits.falseHits === 0 && points <= 1;
      lines.push(
        `goal (${r.row}): 0 false hits on images, hit rate within 1 point of the oracle's: ` +
          `${r.mediaFalseHits.falseHits} false hits, ${pct(r.hitRate)} vs ${oracle === undefined ? "(no oracle row)" : pct(oracle.hitRate)} → ${ok ? "met" : "MISSED"}`,
      );
    }
  }
  if (report.workload === "cache-pressure" && oracle !== undefined) {
    // Issue 27: the default's hit rate holds from run to run, and its TTFT stays at the oracle's.
    const def = row(defaultConfig().policies.policy);
    if (def?.spread !== undefined && oracle.spread !== undefined) {
      const s = def.spread;
      const n = def.repeats?.length ?? 1;
      const worst = s.hitRate.min / oracle.spread.hitRate.mean;
      lines.push(
        `goal: ${def.row} hit-rate spread over ${n} repeats ≤ 1 point: ${pct(s.hitRate.min)}-${pct(s.hitRate.max)} (${points(s.hitRate.spread)}) → ${s.hitRate.spread <= 0.01 + 1e-9 ? "met" : "MISSED"}`,
        `goal: ${def.row} worst repeat ≥ 0.97× the oracle's hit rate: ${pct(s.hitRate.min)} vs ${pct(oracle.spread.hitRate.mean)} (${fmt(worst, 3)}×) → ${worst >= 0.97 ? "met" : "MISSED"}`,
        `goal: ${def.row} mean TTFT over the repeats ≤ the oracle's: ${fmt(def.ttftMs.mean)} vs ${fmt(oracle.ttftMs.mean)} ms → ${def.ttftMs.mean <= oracle.ttftMs.mean ? "met" : "MISSED"}`,
      );
    }
  }
  if (ca === undefined) return lines;
  const rr = row("round_robin");
  const ll = row("least_load");
  if (report.workload === "shared-prefix" || report.workload === "multi-turn") {
    if (oracle !== undefined) {
      const ok = ca.hitRate >= oracle.hitRate * 0.9;
      lines.push(
        `goal: cache_aware hit rate within 10% of the oracle: ${pct(ca.hitRate)} vs ${pct(oracle.hitRate)} → ${ok ? "met" : "MISSED"}`,
      );
    }
    if (rr !== undefined) {
      const ratio = rr.ttftMs.mean / ca.ttftMs.mean;
      lines.push(
        `goal: cache_aware mean TTFT ≥ 2× lower than round_robin: ${fmt(ca.ttftMs.mean)} vs ${fmt(rr.ttftMs.mean)} ms (${fmt(ratio, 2)}×) → ${ratio >= 2 ? "met" : "MISSED"}`,
        `  (for information: p50 ${fmt(rr.ttftMs.p50 / ca.ttftMs.p50, 2)}×; warm mean, without the first ${WARM_SKIP * 100}% of requests, ${fmt(rr.warmTtftMs.mean / ca.warmTtftMs.mean, 2)}×)`,
      );
    }
  }

  if (report.workload === "cache-pressure" && oracle !== undefined) {
    for (const name of ["cache_aware", "prefix_cost"] as const) {
      const r = row(name);
      if (r === undefined) continue;
      const hit = r.hitRate / oracle.hitRate;
      const ttft = r.ttftMs.mean / oracle.ttftMs.mean;
      lines.push(
        `goal: ${name} hit rate ≥ 0.98× the tenant-sticky oracle: ${pct(r.hitRate)} vs ${pct(oracle.hitRate)} (${fmt(hit, 3)}×) → ${hit >= 0.98 ? "met" : "MISSED"}`,
        `goal: ${name} mean TTFT ≤ 0.9× the oracle: ${fmt(r.ttftMs.mean)} vs ${fmt(oracle.ttftMs.mean)} ms (${fmt(ttft, 2)}×) → ${ttft <= 0.9 ? "met" : "MISSED"}`,
      );
    }
  }
  if (report.workload === "no-sharing" && ll !== undefined) {
    const ratio = ca.ttftMs.mean / ll.ttftMs.mean;
    lines.push(
      `goal: cache_aware no worse than least_load (mean TTFT): ${fmt(ca.ttftMs.mean)} vs ${fmt(ll.ttftMs.mean)} ms (${fmt(ratio, 2)}×; within 5% counts as equal) → ${ratio <= 1.05 ? "met" : "MISSED"}`,
    );
  }
  return lines;
}

function resultPath(workload: WorkloadName, tag: string): string {
  return join(RESULTS_DIR, `routing-${workload}${tag === "" ? "" : `-${tag}`}.json`);
}

/** One workload through every row, with the command line's router settings. */
async function runWorkload(
  workload: WorkloadName,
  preset: RoutingPreset,
  cli: CliOptions,
  sharedStateUrl: string | undefined,
  host?: FleetHost,
  warmed?: Set<RowLabel>,
): Promise<WorkloadReport> {
  let bar: ProgressBar | undefined;
  if (cli.decisionTraceDir !== undefined) mkdirSync(cli.decisionTraceDir, { recursive: true });
  return runRoutingWorkload(workload, {
    ...(warmed === undefined ? {} : { warmed }),
    preset,
    rows: cli.rows,
    repeats: cli.repeats,
    timingSeed: cli.timingSeed,
    ...(cli.rate === undefined ? {} : { rate: cli.rate }),
    ...(cli.bypassShare === undefined ? {} : { bypassShare: cli.bypassShare }),
    ...(cli.bypassTo === undefined ? {} : { bypassTo: cli.bypassTo }),
    routerOverrides: {
      ...(cli.cacheLoadBound === undefined ? {} : { cacheLoadBound: cli.cacheLoadBound }),
      ...(cli.prefixIndex === undefined ? {} : { prefixIndex: cli.prefixIndex }),
      ...(cli.maxTreeSize === undefined ? {} : { maxTreeSize: cli.maxTreeSize }),
      ...(cli.prefixCostQueueWeight === undefined
        ? {}
        : { prefixCostQueueWeight: cli.prefixCostQueueWeight }),
      ...(cli.prefixCostRequestChars === undefined
        ? {}
        : { prefixCostRequestChars: cli.prefixCostRequestChars }),
      ...(cli.dataPlane === undefined ? {} : { dataPlane: cli.dataPlane }),
    },
    ...(cli.replicas === undefined ? {} : { replicas: cli.replicas }),
    ...(sharedStateUrl === undefined ? {} : { sharedStateUrl }),
    ...(cli.precisePolicy === undefined ? {} : { precisePolicy: cli.precisePolicy }),
    ...(host === undefined ? {} : { host }),
    diagnose: cli.diagnose,
    ...(cli.decisionTraceDir === undefined ? {} : { decisionTraceDir: cli.decisionTraceDir }),
    isolate: cli.isolate,
    onRowStart: (row, total) => {
      bar = new ProgressBar(`${workload} ${row}`, total);
    },
    onRequest: () => bar?.tick(),
    onRowEnd: () => bar?.finish(),
  });
}

function writeResult(path: string, machine: string, report: unknown, goals: string[]): void {
  writeFileSync(
    path,
    `${JSON.stringify(
      {
        benchmark: "routing",
        date: new Date().toISOString(),
        node: process.version,
        machine,
        loadAverage: os.loadavg(),
        command: commandLine("bench:routing"),
        goals,
        report,
      },
      null,
      2,
    )}\n`,
  );
}

/** --matrix: every cell of the tenants family, one fleet host for all, a summary table at the end. */
async function runMatrix(
  cli: CliOptions,
  machine: string,
  sharedStateUrl: string | undefined,
): Promise<void> {
  const all = cli.preset.name === "quick" ? QUICK_MATRIX_CELLS : MATRIX_CELLS;
  const cells = cli.cells === undefined ? all : all.filter((c) => cli.cells!.includes(c.name));
  const unknown = (cli.cells ?? []).filter((name) => !all.some((c) => c.name === name));
  if (unknown.length > 0 || cells.length === 0) {
    throw new Error(
      `--cells: unknown cell ${unknown.join(", ") || "(none given)"}; the cells are ${all.map((c) => c.name).join(", ")}`,
    );
  }
  if (cli.replay) return replayMatrix(cli, cells, machine);
  const host = cli.isolate ? await childFleetHost() : inlineFleetHost();
  const summaries: CellSummary[] = [];
  const reports: { cell: string; report: WorkloadReport }[] = [];
  const path = join(
    RESULTS_DIR,
    `routing-matrix${[cli.tag, cli.cpuNoise ? "noise" : "", cli.replicas ? `r${cli.replicas}` : ""]
      .filter(Boolean)
      .map((t) => `-${t}`)
      .join("")}.json`,
  );
  try {
    for (const cell of cells) {
      // Each cell's traces in a folder of its own (every cell is the tenants workload).
      const dir = cli.decisionTraceDir;
      const report = await runWorkload(
        "tenants",
        cellPreset(cli.preset, cell),
        dir === undefined ? cli : { ...cli, decisionTraceDir: join(dir, cell.name) },
        sharedStateUrl,
        host,
      );
      console.log(`\n### cell ${cell.name}`);
      printReport(report);
      reports.push({ cell: cell.name, report });
      summaries.push(...summarizeCell(cell.name, report));
      // Written after every cell, so that a long matrix cut short keeps what it measured.
      writeResult(path, machine, { cells: reports, summaries }, []);
    }
  } finally {
    await host.close();
  }
  console.log(
    `\n## matrix: ${cells.length} cells of the tenants family, ${cli.repeats} repeats${cli.cpuNoise ? ", with --cpu-noise" : ""}${cli.replicas ? `, ${cli.replicas} replicas${cli.sharedState ? " sharing state" : ""}` : ""}`,
  );
  printMatrix(summaries);
  const goals = [...new Set(summaries.map((s) => s.row))].flatMap((row) =>
    matrixGoalLines(summaries, row),
  );
  for (const line of goals) console.log(line);
  writeResult(path, machine, { cells: reports, summaries }, goals);
  console.log(`results: ${path}`);
  if (path === MATRIX_RESULT) writeMatrixChart();
}

/** --matrix --replay: every cell in model time, a summary line per cell and row. */
async function replayMatrix(
  cli: CliOptions,
  cells: readonly MatrixCell[],
  machine: string,
): Promise<void> {
  const summaries: CellSummary[] = [];
  const seeds = cli.seeds ?? [cli.preset.seed];
  for (const seed of seeds)
    for (const cell of cells) {
      const name = cli.seeds === undefined ? cell.name : `${cell.name}@${seed}`;
      const got = await replayCell(
        name,
        cellPreset({ ...cli.preset, seed }, cell),
        cli.rows,
        cli.repeats,
        cli.timingSeed,
        cli.jitter,
        cli.sharedState && cli.replicas !== undefined
          ? { count: cli.replicas, delayMs: cli.replicaDelayMs }
          : undefined,
      );
      for (const s of got) {
        console.log(
          `${name} ${s.row}: hit ${(s.hitMean * 100).toFixed(1)}% (worst ${(s.hitMin * 100).toFixed(1)}, spread ${(s.hitSpread * 100).toFixed(1)}, sd ${((s.hitSd ?? Number.NaN) * 100).toFixed(2)}) vs oracle ${(s.oracleHitMean * 100).toFixed(1)}%, TTFT ${s.ttftMeanMs.toFixed(1)} vs ${s.oracleTtftMeanMs.toFixed(1)} model ms`,
        );
      }
      summaries.push(...got);
    }
  console.log(
    `\n## matrix, model-time replay: ${cells.length} cells of the tenants family, ${cli.jitter > 0 ? `workload seed${seeds.length > 1 ? "s" : ""} ${seeds.join(", ")}, ${cli.repeats} timing seeds from ${cli.timingSeed} (engine steps ±${cli.jitter * 100}%)` : `${cli.repeats} workload seeds from ${cli.preset.seed}`}; TTFT in model ms`,
  );
  printMatrix(summaries);
  const goals = [...new Set(summaries.map((s) => s.row))].flatMap((row) =>
    matrixGoalLines(summaries, row),
  );
  for (const line of goals) console.log(line);
  if (cli.seeds !== undefined) {
    console.log(`\n## deviation over ${cells.length} cells × ${seeds.length} workload seeds`);
    for (const line of deviationLines(summaries)) console.log(line);
  }
  if (cli.swings) {
    const swings: SwingDecomposition[] = [];
    for (const cell of cells) {
      for (const row of cli.rows.filter((r) => r !== ORACLE_ROW)) {
        swings.push(
          await decomposeSwings(
            cell.name,
            cellPreset(cli.preset, cell),
            row,
            cli.repeats,
            cli.timingSeed,
            cli.jitter,
          ),
        );
      }
    }
    console.log(
      "\n## swings: spread (points) of each run's decisions under every timing seed, and of its first placements frozen",
    );
    printSwings(swings);
  }
  const tag = [cli.tag, cli.replicas && cli.sharedState ? `r${cli.replicas}` : ""]
    .filter(Boolean)
    .join("-");
  const path = join(RESULTS_DIR, `routing-matrix-replay${tag ? `-${tag}` : ""}.json`);
  writeResult(path, machine, { summaries }, goals);
  console.log(`results: ${path}`);
  if (path === REPLAY_RESULT) writeMatrixChart();
}

async function main(): Promise<void> {
  // The PD workload runs a disaggregated fleet of its own (bench/lib/pd-workload.ts).
  const argv = process.argv.slice(2);
  if (argv.some((a, i) => a === "--workload=pd" || (a === "--workload" && argv[i + 1] === "pd"))) {
    return pdMain(argv, commandLine("bench:routing"));
  }
  let cli: CliOptions;
  try {
    cli = parseCli(process.argv.slice(2));
  } catch (err) {
    console.error(`bench:routing: ${(err as Error).message}`);
    process.exit(2);
  }
  mkdirSync(RESULTS_DIR, { recursive: true });
  const machine = `${os.cpus().length} × ${os.cpus()[0]?.model ?? "cpu"}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, ${os.platform()} ${os.release()}`;
  console.log(`bench:routing — ${new Date().toISOString()} — node ${process.version} — ${machine}`);
  const reports: WorkloadReport[] = [];
  // --shared-state: one local redis-server for the run; each row's replicas get their own prefix.
  const redis = cli.sharedState ? await startLocalRedis() : undefined;
  const noise = cli.cpuNoise ? startCpuNoise(cli.timingSeed) : undefined;
  try {
    if (cli.matrix) {
      await runMatrix(cli, machine, redis?.url);
      return;
    }
    // One fleet host for every workload: a child host costs seconds to start (a quick run's sixth).
    const host = cli.isolate ? await childFleetHost() : undefined;
    // --quick warms each row once, on the first workload: JIT is warm for the rest of the run.
    const warmed = cli.preset.name === "quick" ? new Set<RowLabel>() : undefined;
    try {
      for (const workload of cli.workloads) {
        const report = await runWorkload(workload, cli.preset, cli, redis?.url, host, warmed);
        printReport(report);
        reports.push(report);
        writeResult(resultPath(workload, cli.tag), machine, report, goalLines(report));
      }
    } finally {
      await host?.close();
    }
  } finally {
    await noise?.stop();
    await redis?.stop();
  }
  if (cli.chart) {
    // Every workload's latest default-preset result, so a single-workload run updates its panel.
    const all: WorkloadReport[] = [];
    for (const w of WORKLOADS) {
      try {
        all.push(
          (JSON.parse(readFileSync(resultPath(w, ""), "utf8")) as { report: WorkloadReport })
            .report,
        );
      } catch {
        // not run yet
      }
    }
    const p = cli.preset;
    const arrival = cli.rate === undefined ? `closed loop ×${p.concurrency}` : `${cli.rate} req/s`;
    const caption =
      `npm run bench:routing — ${cli.repeats} repeats (bar: mean, line: worst to best), ${p.workers} simulated workers, ${p.kvCapacityTokens} KV tokens each, ` +
      `timeScale ${p.timeScale}, ${arrival}, seed ${p.seed}, node ${process.version}, ${new Date().toISOString().slice(0, 10)}`;
    writeFileSync(CHART_PATH, routingChartSvg(all, caption, defaultConfig().policies.policy));
    console.log(`\nchart: ${CHART_PATH}`);
  }
  console.log(`results: ${RESULTS_DIR}/routing-<workload>${cli.tag ? `-${cli.tag}` : ""}.json`);
}

runIfEntryPoint(import.meta.url, main);
