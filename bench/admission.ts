/**
 * Admission (issue 24): a noisy neighbour and a priority flood against the real router (its own
 * process) and simulated SGLang engines (a child process, real time), with and without
 * --queue-when-saturated, side by side in one run. Every request streams; TTFT is measured at the
 * client (send to first body chunk), and the router's --queue-wait-header says how long each
 * request waited in the router's queue, so each TTFT splits into router wait + the rest (the
 * engine's queue and steps, the relay).
 *
 *   npm run bench:admission                    calibration, then every run (about 3 minutes)
 *   npm run bench:admission -- --flood-secs 34 --light-secs 68 --silent-secs 68   408 samples per pooled group
 *   npm run bench:admission -- --engine-priority --max-batch-tokens 512 --runs silent,flood/on,floor/on
 *
 * Runs, each on a fresh fleet (cold caches):
 *   calibrate       tenant A alone, closed loop at 3x the fleet's batch slots: A's capacity, req/s
 *   silent          tenants B-D alone (steady, light): their unloaded TTFT
 *   flood/off       A at 3x capacity (long prompts) + B-D, no admission
 *   flood/on        the same with --queue-when-saturated (the router's default depth unless --depth)
 *   flood/prio      flood/on with --engine-priority on engines scheduling by priority (the flood's
 *                   tenant reaches them one step lower than the light ones)
 *   flood/no-reserve  flood/on with --tenant-reserve-slots 0: no slot kept free for the light
 *                   tenants (what the reserve wins, side by side)
 *   flood/no-hold   flood/on with --hold-for-free-slot false: a request that finds no free slot
 *                   goes where the depth allows (into one engine's first-come queue) instead of
 *                   waiting in the router for the first slot to free (what the hold wins and costs,
 *                   side by side)
 *   flood/no-pace   flood/on with --tenant-reserve-pace false: the tenant over its share goes into
 *                   any free slot beyond the reserve, however many of its prompts are in prefill
 *                   there (what the pace wins and costs, side by side)
 *   flood/tight     flood/on with tight queue bounds (--queue-size 64, --max-queued-per-tenant 32,
 *                   --queue-timeout-secs 5): refusals happen; each must be a 429/503 with
 *                   Retry-After, and only the flooding tenant's
 *   floor/on        the engine's floor: A's flood as in flood/on (through the router, admission
 *                   on), but B-D's requests go straight to the engines (round robin, bypassing the
 *                   router: never held) with the body's `priority` above anything the router sends,
 *                   and the engines schedule by priority (preempting a flood request for them)
 *                   whatever --engine-priority says. Their TTFT is what the engine's steps alone
 *                   cost a light request under this flood: the part of flood/on's TTFT no router
 *                   can remove. (bench:admission-floor computes the same floor in model time, no
 *                   HTTP or CPU noise; this one is measured like the other runs, beside them.)
 *   prio-silent     high-priority requests alone (steady, light), --engine-priority
 *   prio-flood/on   low-priority flood at 3x capacity + the same high-priority requests, admission
 *                   and --engine-priority on engines scheduling by priority
 *
 * Options (defaults in parse()):
 *   --flood-secs, --silent-secs   how long the flood, and the silent runs, send; samples per
 *                                 group = rate x secs (default 24 s silent: 144 light samples, so
 *                                 the baseline p99 is not the single slowest request)
 *   --light-secs                  how long the light B-D streams beside a flood send (default 1.5x
 *                                 --flood-secs: 108 light samples, so the p99 is not the single
 *                                 slowest request; at 3x capacity the flood's backlog lasts about
 *                                 three times as long, and the light requests sent while it still has
 *                                 requests waiting are under it all the same, in the router's queue
 *                                 or the engines'). A light request sent after the flood's last
 *                                 request got its first token (nothing of the flood waiting any
 *                                 more) is left out of its group's figures (group "B~after"...),
 *                                 and the run says how many.
 *   --light-rate R                requests/s of each light tenant B, C, D (pooled B-D: 3R/s) and 3R/s
 *                                 of high priority; the p99s below are over the pooled groups. The
 *                                 high-priority stream sends --silent-secs in prio-silent and in
 *                                 prio-flood/on alike (144 samples each by default): the ratio's
 *                                 two p99s stand on as many samples
 *   --repeats N (N > 1)           also gives each target over every repeat's samples pooled
 *                                 (3 repeats: 432 high-priority samples a side, its p99 the 5th
 *                                 slowest instead of one repeat's 2nd slowest)
 *   --max-batch-tokens N          the engines' tokens per step (chunked prefill; sim option
 *                                 maxBatchTokens; default 2048 here, the check's: SGLang --chunked-prefill-size,
 *                                 vLLM --max-num-batched-tokens). A's 1,000-token prompt is one
 *                                 ~33 ms step at 8192; 512 splits it into two ~17 ms steps.
 *   --engine-priority             router --engine-priority and the engines' priority scheduling
 *   --preemption-threshold N      the simulated SGLang engines' --priority-scheduling-preemption-
 *                                 threshold when they schedule by priority (default 10, SGLang's):
 *                                 a request preempts running ones only when its priority is above
 *                                 theirs by more than N (docs/simulator.md). At 10 the flood/on
 *                                 run's one-step demotion of the flood preempts nothing, the
 *                                 prio-flood/on run's gap (10 against -1 or below) does; 0 is the
 *                                 most favourable engine. The floor run's gap (~1000) preempts
 *                                 below 900.
 *   --decode-log-interval N       when the engines' /metrics gauges change (sim decodeLogInterval):
 *                                 SGLang sets them at each prefill batch and every N decode steps
 *                                 (default 40, SGLang's), vLLM after every step; 0 = live, every
 *                                 read sees the engine as it is (what the simulator did before)
 *   --engine sglang|vllm          the engines' rules (default sglang: prefill-first steps; vllm: v1's
 *                                 mixed steps, no preemption for a waiting request; docs/simulator.md)
 *   --worker-max-running          router --worker-max-running = --max-running (vLLM says no cap)
 *   --reserve-slots N             router --tenant-reserve-slots of the admission runs (default: the
 *                                 router's)
 *   --repeats N                   make the chosen runs N times (one calibration) and print each
 *                                 target's value per repeat, its median and its worst (default 1)
 *   --runs a,b,...                only these runs (targets that need a missing run print "-";
 *                                 floor/on sends SGLang's priority direction: leave it out with vllm)
 *   --workers, --max-running, --depth, --poll-secs, --overload   fleet and admission knobs
 *
 * Prints: per run and tenant the counts and TTFT; per run and pooled group (B-D, high) the samples
 * n, how many the router held, TTFT, router wait and TTFT − wait p50/p99; the targets with the
 * samples behind each p99. Writes bench/results/admission.json.
 */
import os from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { type Config, configWith } from "../src/config.js";
import {
  HEAVY,
  LIGHT,
  type Outcome,
  QUEUE_WAIT_HEADER,
  type RequestShape,
  send,
  stream,
  type Target,
} from "./lib/admission-load.js";
import {
  pooledRuns,
  printRows,
  printSplits,
  type Run,
  repeatedTargets,
  rows,
  type Split,
  split,
  type TargetRow,
  targetRows,
} from "./lib/admission-report.js";
import { commandLine, runIfEntryPoint, writeResults } from "./lib/entry.js";
import { childFleetHost, type FleetHost } from "./lib/fleet.js";
import { fmt } from "./lib/latency.js";
import { listFlag } from "./lib/list-flag.js";
import { startRouterProcess } from "./lib/router-process.js";
import { printTable } from "./lib/stats.js";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const RESULTS = join(ROOT, "bench", "results", "admission.json");

const RUNS = [
  "silent",
  "flood/off",
  "flood/on",
  "flood/prio",
  "flood/no-reserve",
  "flood/no-hold",
  "flood/no-pace",
  "flood/tight",
  "floor/on",
  "prio-silent",
  "prio-flood/on",
] as const;
type RunName = (typeof RUNS)[number];

/**
 * The floor run's light requests, straight to an engine: a body `priority` above any the router
 * sends (its --priority-header range is [-100, 100]); the simulated engines are SGLang's, higher
 * first (sim/priority-order.ts).
 */
const FLOOR_PRIORITY = 1000;

interface Options {
  workers: number;
  maxRunning: number;
  /** The engines' tokens per step (sim maxBatchTokens); undefined = the sim's default. */
  maxBatchTokens: number | undefined;
  floodSecs: number;
  /** How long the light (and high-priority) streams beside a flood send. */
  lightSecs: number;
  silentSecs: number;
  /** --saturation-queue-depth of the admission runs; undefined = the router's default. */
  depth: number | undefined;
  /** Whose scheduling rules the simulated engines follow (sim flavor and step rule). */
  engine: "sglang" | "vllm";
  /** Router --worker-max-running = the engines' batch (vLLM says none of its own). */
  workerMaxRunning: boolean;
  /** Router --tenant-reserve-slots of the admission runs; undefined = the router's default. */
  reserveSlots: number | undefined;
  pollSecs: number;
  /** Requests per second of each light tenant (B, C, D); the high-priority stream sends 3x. */
  lightRate: number;
  /** A's flood, as a multiple of the measured capacity. */
  overload: number;
  /** Router --engine-priority and the sims' priority scheduling (their preemption included). */
  enginePriority: boolean;
  /** The sims' SGLang --priority-scheduling-preemption-threshold under priority scheduling. */
  preemptionThreshold: number;
  /** When the sims' /metrics gauges change (sim decodeLogInterval; 0 = live); undefined = the sim's. */
  decodeLogInterval: number | undefined;
  runs: RunName[];
  /** Times the chosen runs are made (after one calibration): the targets' median and worst. */
  repeats: number;
  /** Where to write every request's outcome (send time, engine, TTFT, router wait); none when undefined. */
  trace: string | undefined;
}

/** What one run changes in the router's flags beyond the options (bounds, the reserve). */
type RouterFlags = Record<string, unknown>;

/** flood/tight's bounds: the flood fills them within a second, so refusals happen. */
const TIGHT: RouterFlags = { queueSize: 64, maxQueuedPerTenant: 32, queueTimeoutSecs: 5 };

function routerConfig(
  workerUrls: string[],
  o: Options,
  admission: boolean,
  enginePriority: boolean,
  flags: RouterFlags = {},
): Config {
  return configWith({
    host: "127.0.0.1",
    port: 0,
    logLevel: "warn",
    workerUrls,
    healthCheckIntervalSecs: 0,
    enginePollIntervalSecs: o.pollSecs,
    requestTimeoutSecs: 600,
    streamFirstByteTimeoutSecs: 600,
    queueWhenSaturated: admission,
    ...(o.depth === undefined ? {} : { saturationQueueDepth: o.depth }),
    ...(o.workerMaxRunning ? { workerMaxRunning: o.maxRunning } : {}),
    ...(o.reserveSlots === undefined ? {} : { tenantReserveSlots: o.reserveSlots }),
    // Bounds wide enough that nothing is shed: the throughput comparison serves the same work.
    queueSize: 100_000,
    maxQueuedPerTenant: 100_000,
    queueTimeoutSecs: 600,
    enginePriority,
    // Each answer says how long its request waited here: the per-request split of its TTFT.
    queueWaitHeader: QUEUE_WAIT_HEADER,
    ...flags,
  });
}

/** The router's URL and the engines' (the floor run sends around the router). */
interface Endpoints {
  router: string;
  engines: string[];
}

async function withFleet<T>(
  host: FleetHost,
  o: Options,
  admission: boolean,
  body: (at: Endpoints) => Promise<T>,
  /** The engines schedule by priority whatever --engine-priority says (the floor run). */
  priorityScheduling = o.enginePriority,
  /** The router passes priorities on (--engine-priority). */
  enginePriority = o.enginePriority,
  flags: RouterFlags = {},
): Promise<T> {
  const fleet = await host.startFleet({
    count: o.workers,
    worker: {
      flavor: o.engine,
      // The name every request asks for (vLLM answers 404 for a model it does not serve).
      model: "m",
      // SGLang runs a step's prefill alone (scheduler.py); vLLM v1 mixes it with decode.
      stepRule: o.engine === "sglang" ? "prefill-first" : "mixed",
      maxRunning: o.maxRunning,
      timeScale: 1,
      priorityScheduling,
      prioritySchedulingPreemptionThreshold: o.preemptionThreshold,
      ...(o.decodeLogInterval === undefined ? {} : { decodeLogInterval: o.decodeLogInterval }),
      ...(o.maxBatchTokens === undefined ? {} : { maxBatchTokens: o.maxBatchTokens }),
    },
  });
  const engines = fleet.workers.map((w) => w.url);
  const router = await startRouterProcess(
    routerConfig(engines, o, admission, enginePriority, flags),
  );
  try {
    return await body({ router: router.url, engines });
  } finally {
    await router.stop();
    await fleet.close();
  }
}

async function run(
  host: FleetHost,
  o: Options,
  name: RunName,
  admission: boolean,
  load: (at: Endpoints, startedAt: number) => Promise<Outcome[]>[],
  priorityScheduling = o.enginePriority,
  enginePriority = o.enginePriority,
  flags: RouterFlags = {},
): Promise<Run> {
  return withFleet(
    host,
    o,
    admission,
    async (at) => {
      // Two polls of the engines before the load: the router starts with fresh readings.
      await new Promise((r) => setTimeout(r, o.pollSecs * 2000));
      const startedAt = performance.now();
      const sampler = sampleEngineQueues(at.engines, o.maxRunning, [2000, o.lightSecs * 1000]);
      const outcomes = afterFlood((await Promise.all(load(at, startedAt))).flat());
      const queues = sampler.stop();
      const spanSecs = Math.max(...outcomes.map((x) => x.endedAt)) / 1000;
      const after = outcomes.filter((x) => x.group.endsWith(AFTER)).length;
      process.stdout.write(
        `${name}: ${outcomes.length} requests in ${fmt(spanSecs)} s; engine queues ${queues}${after > 0 ? `; ${after} light requests sent after the flood's backlog, left out` : ""}\n`,
      );
      if (admission) process.stdout.write(await queueWaitReport(at.router));
      return { name, outcomes, spanSecs };
    },
    priorityScheduling,
    enginePriority,
    flags,
  );
}

/** Suffix of the group of a light request sent once nothing of the flood waited any more. */
const AFTER = "~after";

/**
 * The light and high-priority requests sent after the flood's backlog cleared (its last request's
 * first token: until then some of it waited, in the router's queue or an engine's) go to a group
 * of their own, out of the figures under the flood; runs without a flood are left as they are.
 */
function afterFlood(outcomes: Outcome[]): Outcome[] {
  const isFlood = (x: Outcome) => x.group === "A" || x.group === "low";
  let backlogEnd = Number.NEGATIVE_INFINITY;
  for (const x of outcomes) {
    if (isFlood(x)) backlogEnd = Math.max(backlogEnd, x.sentAt + (x.ttftMs ?? 0));
  }
  if (backlogEnd === Number.NEGATIVE_INFINITY) return outcomes;
  return outcomes.map((x) =>
    isFlood(x) || x.sentAt <= backlogEnd ? x : { ...x, group: `${x.group}${AFTER}` },
  );
}

/**
 * The engines' own waiting queues while a run sends (the simulator's /_sim/stats every 100 ms):
 * with admission holding the flood at the batch's edge they stay near empty. Beside them, the
 * fleet's free batch slots (caps − running − waiting, summed over the engines) while the light
 * tenants send (from 2 s in, the flood backlogged by then): the slots kept for them
 * (--tenant-reserve-slots) less those they use, and anything beyond that is a slot the router
 * left idle while it held work it could have sent (a count that errs toward holding).
 */
function sampleEngineQueues(
  engines: readonly string[],
  cap: number,
  lightWindowMs: [number, number],
): { stop(): string } {
  const samples: number[] = [];
  const free: number[] = [];
  const startedAt = performance.now();
  let running = true;
  const loop = async () => {
    while (running) {
      const at = performance.now() - startedAt;
      let fleetFree = 0;
      let read = 0;
      for (const url of engines) {
        try {
          const stats = (await (await fetch(`${url}/_sim/stats`)).json()) as {
            waiting: number;
            running: number;
          };
          samples.push(stats.waiting);
          fleetFree += cap - stats.running - stats.waiting;
          read += 1;
        } catch {
          // A sample lost under load: the others stand.
        }
      }
      if (read === engines.length && at >= lightWindowMs[0] && at <= lightWindowMs[1]) {
        free.push(fleetFree);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  void loop();
  return {
    stop() {
      running = false;
      if (samples.length === 0) return "-";
      const sorted = [...samples].sort((a, b) => a - b);
      const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
      const slots =
        free.length === 0
          ? ""
          : `; fleet free slots while the light tenants send mean ${fmt(mean(free), 2)} (${free.length} samples)`;
      return `mean ${fmt(mean(samples), 1)}, max ${sorted[sorted.length - 1]} (per engine, ${samples.length} samples)${slots}`;
    },
  };
}

/**
 * Where a request's TTFT goes: the mean time it waited in the router's admission queue, per tenant
 * and per priority, from the router's own histograms (the rest of its TTFT is at the engine).
 */
async function queueWaitReport(url: string): Promise<string> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const sums = new Map<string, { sum: number; count: number }>();
  const line = /^radixgate_(tenant_)?queue_wait_seconds_(sum|count)\{(\w+)="([^"]*)"\} (\S+)$/;
  for (const l of text.split("\n")) {
    const m = line.exec(l);
    if (m === null) continue;
    const key = `${m[3]}=${m[4]}`;
    const entry = sums.get(key) ?? { sum: 0, count: 0 };
    if (m[2] === "sum") entry.sum = Number(m[5]);
    else entry.count = Number(m[5]);
    sums.set(key, entry);
  }
  const parts = [...sums].map(
    ([key, { sum, count }]) => `${key} ${count} queued, mean ${fmt(count ? sum / count : 0)} s`,
  );
  return `  router queue wait: ${parts.join("; ")}\n`;
}

/** Closed loop of A alone at 3x the batch slots: completions a second once the batch is full. */
async function calibrate(host: FleetHost, o: Options): Promise<number> {
  return withFleet(host, o, false, async (at) => {
    const slots = o.workers * o.maxRunning;
    const startedAt = performance.now();
    const deadline = startedAt + 8000;
    const router: Target = { url: at.router, direct: false };
    let done = 0;
    const loop = async () => {
      while (performance.now() < deadline) {
        const out = await send(router, HEAVY({}), startedAt);
        // Counted from the third second on: the batch is full by then.
        if (out.status === 200 && out.endedAt > 2000) done += 1;
      }
    };
    await Promise.all(Array.from({ length: slots * 3 }, loop));
    const capacity = done / (8 - 2);
    process.stdout.write(`calibrate: A's capacity ${fmt(capacity)} req/s\n`);
    return capacity;
  });
}

function engineRules(name: string | undefined): "sglang" | "vllm" {
  if (name === "sglang" || name === "vllm") return name;
  throw new Error(`bench:admission: --engine must be sglang or vllm, got ${name}`);
}

function parse(): Options {
  const { values } = parseArgs({
    options: {
      workers: { type: "string", default: "2" },
      "max-running": { type: "string", default: "8" },
      "max-batch-tokens": { type: "string", default: "2048" },
      engine: { type: "string", default: "sglang" },
      "worker-max-running": { type: "boolean", default: false },
      "reserve-slots": { type: "string" },
      "flood-secs": { type: "string", default: "12" },
      "light-secs": { type: "string" },
      "silent-secs": { type: "string", default: "24" },
      depth: { type: "string" },
      "poll-secs": { type: "string", default: "0.5" },
      "light-rate": { type: "string", default: "2" },
      overload: { type: "string", default: "3" },
      "engine-priority": { type: "boolean", default: false },
      "preemption-threshold": { type: "string", default: "10" },
      "decode-log-interval": { type: "string" },
      runs: { type: "string" },
      repeats: { type: "string", default: "1" },
      trace: { type: "string" },
    },
  });
  const repeats = Number(values.repeats);
  if (!Number.isInteger(repeats) || repeats < 1 || repeats > 20) {
    throw new Error(
      `bench:admission: --repeats must be an integer from 1 to 20, got ${values.repeats}`,
    );
  }
  const batchTokens = values["max-batch-tokens"];
  return {
    workers: Number(values.workers),
    maxRunning: Number(values["max-running"]),
    maxBatchTokens: batchTokens === undefined ? undefined : Number(batchTokens),
    floodSecs: Number(values["flood-secs"]),
    lightSecs:
      values["light-secs"] === undefined
        ? 1.5 * Number(values["flood-secs"])
        : Number(values["light-secs"]),
    silentSecs: Number(values["silent-secs"]),
    depth: values.depth === undefined ? undefined : Number(values.depth),
    engine: engineRules(values.engine),
    workerMaxRunning: values["worker-max-running"] === true,
    reserveSlots:
      values["reserve-slots"] === undefined ? undefined : Number(values["reserve-slots"]),
    pollSecs: Number(values["poll-secs"]),
    lightRate: Number(values["light-rate"]),
    overload: Number(values.overload),
    enginePriority: values["engine-priority"] === true,
    preemptionThreshold: Number(values["preemption-threshold"]),
    decodeLogInterval:
      values["decode-log-interval"] === undefined
        ? undefined
        : Number(values["decode-log-interval"]),
    runs: listFlag("bench:admission", values.runs, RUNS, (x) => x as RunName, "runs"),
    repeats,
    trace: values.trace,
  };
}

async function main(): Promise<void> {
  const o = parse();
  const host = await childFleetHost();
  const light = ["B", "C", "D"];
  try {
    const capacity = await calibrate(host, o);
    const floodRate = capacity * o.overload;
    const via = (at: Endpoints): Target[] => [{ url: at.router, direct: false }];
    const lightLoad = (targets: Target[], t0: number, secs: number, extra: Partial<RequestShape>) =>
      light.map((g, i) =>
        stream(
          targets,
          { ...LIGHT(g, { "x-tenant-id": `tenant-${g}` }), ...extra },
          o.lightRate,
          secs,
          t0,
          i * 97,
        ),
      );
    const aFlood = (at: Endpoints, t0: number) =>
      stream(via(at), HEAVY({ "x-tenant-id": "tenant-A" }), floodRate, o.floodSecs, t0);
    const flood = (at: Endpoints, t0: number) => [
      aFlood(at, t0),
      ...lightLoad(via(at), t0, o.lightSecs, {}),
    ];
    const high = (at: Endpoints, t0: number, secs: number) => [
      stream(via(at), LIGHT("high", { "x-priority": "10" }), o.lightRate * 3, secs, t0, 50),
    ];
    const plan: Record<RunName, () => Promise<Run>> = {
      silent: () =>
        run(host, o, "silent", false, (at, t0) => lightLoad(via(at), t0, o.silentSecs, {})),
      "flood/off": () => run(host, o, "flood/off", false, flood),
      "flood/on": () => run(host, o, "flood/on", true, flood),
      // The same flood with --engine-priority on engines that schedule by priority: the flooding
      // tenant's requests reach the engine one step lower than the light tenants'.
      "flood/prio": () => run(host, o, "flood/prio", true, flood, true, true),
      "flood/no-reserve": () =>
        run(host, o, "flood/no-reserve", true, flood, o.enginePriority, o.enginePriority, {
          tenantReserveSlots: 0,
        }),
      "flood/no-hold": () =>
        run(host, o, "flood/no-hold", true, flood, o.enginePriority, o.enginePriority, {
          holdForFreeSlot: false,
        }),
      "flood/no-pace": () =>
        run(host, o, "flood/no-pace", true, flood, o.enginePriority, o.enginePriority, {
          tenantReservePace: false,
        }),
      "flood/tight": () =>
        run(host, o, "flood/tight", true, flood, o.enginePriority, o.enginePriority, TIGHT),
      "floor/on": () =>
        run(
          host,
          o,
          "floor/on",
          true,
          (at, t0) => [
            aFlood(at, t0),
            ...lightLoad(
              at.engines.map((url) => ({ url, direct: true })),
              t0,
              o.lightSecs,
              { priority: FLOOR_PRIORITY },
            ),
          ],
          true,
        ),
      "prio-silent": () =>
        run(host, o, "prio-silent", true, (at, t0) => high(at, t0, o.silentSecs), true, true),
      "prio-flood/on": () =>
        run(
          host,
          o,
          "prio-flood/on",
          true,
          (at, t0) => [
            stream(
              via(at),
              { ...HEAVY({ "x-priority": "-1" }), group: "low" },
              floodRate,
              o.floodSecs,
              t0,
            ),
            // As long as prio-silent's: the two p99s of the ratio stand on as many samples.
            ...high(at, t0, o.silentSecs),
          ],
          true,
          true,
        ),
    };
    const traced: { repeat: number; run: string; outcomes: Outcome[] }[] = [];
    const repeats: { table: ReturnType<typeof rows>; splits: Split[]; targets: TargetRow[] }[] = [];
    for (let repeat = 1; repeat <= o.repeats; repeat++) {
      if (o.repeats > 1) console.log(`\n=== repeat ${repeat} of ${o.repeats}`);
      const runs: Run[] = [];
      for (const name of RUNS) if (o.runs.includes(name)) runs.push(await plan[name]());
      for (const r of runs) traced.push({ repeat, run: r.name, outcomes: r.outcomes });

      const table = runs.flatMap((r) => rows(r, ["A", ...light, "high", "low"]));
      printRows(table);
      console.log("");
      const splits = runs.flatMap((r) =>
        [split(r, "B-D", light), split(r, "high", ["high"])].filter(
          (x): x is Split => x !== undefined,
        ),
      );
      printSplits(splits);
      console.log("");
      const goals = targetRows(
        runs,
        light,
        table.reduce((s, x) => s + x.lost, 0),
      );
      printTable(
        ["target", "measured", "samples (p99 / base p99)", "goal"],
        goals.map((g) => [g.target, g.shown, g.samples, g.goal]),
      );
      repeats.push({ table, splits, targets: goals });
    }
    if (o.repeats > 1) {
      console.log(`\nover ${o.repeats} repeats (one calibration; each repeat on fresh fleets):`);
      const lost = repeats.reduce((n, r) => n + r.table.reduce((m, x) => m + x.lost, 0), 0);
      const pooled = targetRows(pooledRuns(traced), light, lost);
      printTable(
        ["target", "each repeat", "median", "worst", "pooled", "pooled samples", "goal"],
        repeatedTargets(
          repeats.map((r) => r.targets),
          pooled,
        ),
      );
    }
    writeResults(RESULTS, {
      command: commandLine("bench:admission"),
      date: new Date().toISOString(),
      machine: { cpus: os.cpus().length, loadavg: os.loadavg() },
      options: o,
      capacityReqPerSec: capacity,
      repeats,
    });
    console.log(`\nresults: ${RESULTS}`);
    if (o.trace !== undefined) {
      writeResults(o.trace, { command: commandLine("bench:admission"), runs: traced });
      console.log(`every request: ${o.trace}`);
    }
  } finally {
    await host.close();
  }
}

runIfEntryPoint(import.meta.url, main);
