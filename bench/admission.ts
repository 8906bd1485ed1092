/**
 * Admission (issue 24): a noisy neighbour and a priority flood against the real router (its own
 * process) and simulated SGLang engines (a child process, real time), with and without
 * --queue-when-saturated, side by side in one run. Every request streams; TTFT is measured at the
 * client (send to first body chunk).
 *
 *   npm run bench:admission                    calibration, then every run (about 3 minutes)
 *   npm run bench:admission -- --flood-secs 20 --depth 2
 *
 * Runs, each on a fresh fleet (cold caches):
 *   calibrate       tenant A alone, closed loop at 3x the fleet's batch slots: A's capacity, req/s
 *   silent          tenants B-D alone (steady, light): their unloaded TTFT
 *   flood/off       A at 3x capacity (long prompts) + B-D, no admission
 *   flood/on        the same with --queue-when-saturated
 *   prio-silent     high-priority requests alone (steady, light)
 *   prio-flood/on   low-priority flood at 3x capacity + the same high-priority requests, admission on
 *
 * Prints the tables of docs/benchmarks.md and writes bench/results/admission.json.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import os from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { type Config, configWith } from "../src/config.js";
import { commandLine, runIfEntryPoint } from "./lib/entry.js";
import { childFleetHost, type FleetHost } from "./lib/fleet.js";
import { fmt, summarizeMs } from "./lib/latency.js";
import { startRouterProcess } from "./lib/router-process.js";
import { printTable } from "./lib/stats.js";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const RESULTS = join(ROOT, "bench", "results", "admission.json");

interface Options {
  workers: number;
  maxRunning: number;
  floodSecs: number;
  silentSecs: number;
  /** --saturation-queue-depth of the admission runs. */
  depth: number;
  pollSecs: number;
  /** Requests per second of each light tenant (B, C, D) and of the high-priority stream. */
  lightRate: number;
  /** A's flood, as a multiple of the measured capacity. */
  overload: number;
  /** Router --engine-priority and the sims' priority scheduling (their preemption included). */
  enginePriority: boolean;
}

/** One kind of request: its prompt length, output and headers. */
interface RequestShape {
  group: string;
  promptChars: number;
  maxTokens: number;
  headers: Record<string, string>;
}

const HEAVY = (headers: Record<string, string>): RequestShape => ({
  group: "A",
  promptChars: 4000,
  maxTokens: 96,
  headers,
});
const LIGHT = (group: string, headers: Record<string, string>): RequestShape => ({
  group,
  promptChars: 400,
  maxTokens: 16,
  headers,
});

interface Outcome {
  group: string;
  status: number | "error";
  ttftMs: number | undefined;
  tokens: number;
  retryAfter: boolean;
  endedAt: number;
}

let serial = 0;

/** One streamed completion; resolves with its outcome, never throws. */
async function send(url: string, shape: RequestShape, startedAt: number): Promise<Outcome> {
  const sent = performance.now();
  const id = serial++;
  // Distinct prompts (no shared prefix across requests: the cache does not blur the comparison).
  const prompt = `${shape.group} ${id} `.padEnd(
    shape.promptChars,
    `${shape.group.toLowerCase()}x `,
  );
  try {
    const res = await fetch(`${url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", ...shape.headers },
      body: JSON.stringify({ model: "m", prompt, max_tokens: shape.maxTokens, stream: true }),
    });
    if (res.status !== 200) {
      await res.text();
      return {
        group: shape.group,
        status: res.status,
        ttftMs: undefined,
        tokens: 0,
        retryAfter: res.headers.get("retry-after") !== null,
        endedAt: performance.now() - startedAt,
      };
    }
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    let ttftMs: number | undefined;
    for (;;) {
      const { done } = await reader.read();
      if (done) break;
      ttftMs ??= performance.now() - sent;
    }
    return {
      group: shape.group,
      status: 200,
      ttftMs,
      tokens: shape.maxTokens,
      retryAfter: false,
      endedAt: performance.now() - startedAt,
    };
  } catch {
    return {
      group: shape.group,
      status: "error",
      ttftMs: undefined,
      tokens: 0,
      retryAfter: false,
      endedAt: performance.now() - startedAt,
    };
  }
}

/** Open loop: `rate` requests a second of `shape`, evenly spaced, for `secs`. */
function stream(
  url: string,
  shape: RequestShape,
  rate: number,
  secs: number,
  startedAt: number,
  offsetMs = 0,
): Promise<Outcome[]> {
  const count = Math.floor(rate * secs);
  const gapMs = 1000 / rate;
  const sends: Promise<Outcome>[] = [];
  return new Promise((resolve) => {
    let i = 0;
    const next = () => {
      if (i >= count) {
        resolve(Promise.all(sends));
        return;
      }
      sends.push(send(url, shape, startedAt));
      i += 1;
      const due = offsetMs + i * gapMs - (performance.now() - startedAt);
      setTimeout(next, Math.max(0, due));
    };
    setTimeout(next, offsetMs);
  });
}

function routerConfig(workerUrls: string[], o: Options, admission: boolean): Config {
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
    saturationQueueDepth: o.depth,
    // Bounds wide enough that nothing is shed: the throughput comparison serves the same work.
    queueSize: 100_000,
    maxQueuedPerTenant: 100_000,
    queueTimeoutSecs: 600,
    enginePriority: o.enginePriority,
  });
}

interface Run {
  name: string;
  outcomes: Outcome[];
  spanSecs: number;
}

async function withFleet<T>(
  host: FleetHost,
  o: Options,
  admission: boolean,
  body: (url: string) => Promise<T>,
): Promise<T> {
  const fleet = await host.startFleet({
    count: o.workers,
    worker: { maxRunning: o.maxRunning, timeScale: 1, priorityScheduling: o.enginePriority },
  });
  const router = await startRouterProcess(
    routerConfig(
      fleet.workers.map((w) => w.url),
      o,
      admission,
    ),
  );
  try {
    return await body(router.url);
  } finally {
    await router.stop();
    await fleet.close();
  }
}

async function run(
  host: FleetHost,
  o: Options,
  name: string,
  admission: boolean,
  load: (url: string, startedAt: number) => Promise<Outcome[]>[],
): Promise<Run> {
  return withFleet(host, o, admission, async (url) => {
    // Two polls of the engines before the load: the router starts with fresh readings.
    await new Promise((r) => setTimeout(r, o.pollSecs * 2000));
    const startedAt = performance.now();
    const outcomes = (await Promise.all(load(url, startedAt))).flat();
    const spanSecs = Math.max(...outcomes.map((x) => x.endedAt)) / 1000;
    process.stdout.write(`${name}: ${outcomes.length} requests in ${fmt(spanSecs)} s\n`);
    if (admission) process.stdout.write(await queueWaitReport(url));
    return { name, outcomes, spanSecs };
  });
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
  return withFleet(host, o, false, async (url) => {
    const slots = o.workers * o.maxRunning;
    const startedAt = performance.now();
    const deadline = startedAt + 8000;
    let done = 0;
    let countFrom = 0;
    const loop = async () => {
      while (performance.now() < deadline) {
        const out = await send(url, HEAVY({}), startedAt);
        if (out.status === 200 && out.endedAt > 2000) done += 1;
      }
    };
    countFrom = 2;
    await Promise.all(Array.from({ length: slots * 3 }, loop));
    const capacity = done / (8 - countFrom);
    process.stdout.write(`calibrate: A's capacity ${fmt(capacity)} req/s\n`);
    return capacity;
  });
}

interface Row {
  run: string;
  group: string;
  sent: number;
  served: number;
  refused: number;
  lost: number;
  p50: number;
  p99: number;
  tokensPerSec: number;
}

function rows(r: Run, groups: readonly string[]): Row[] {
  const out: Row[] = [];
  const fleetTokens = r.outcomes.reduce((sum, x) => sum + x.tokens, 0);
  for (const group of groups) {
    const mine = r.outcomes.filter((x) => x.group === group);
    if (mine.length === 0) continue;
    const ttfts = mine.flatMap((x) => (x.ttftMs === undefined ? [] : [x.ttftMs]));
    const s = summarizeMs(ttfts);
    const refused = mine.filter(
      (x) => (x.status === 429 || x.status === 503) && x.retryAfter,
    ).length;
    const served = mine.filter((x) => x.status === 200).length;
    out.push({
      run: r.name,
      group,
      sent: mine.length,
      served,
      refused,
      lost: mine.length - served - refused,
      p50: s.p50,
      p99: s.p99,
      tokensPerSec: fleetTokens / r.spanSecs,
    });
  }
  return out;
}

function parse(): Options {
  const { values } = parseArgs({
    options: {
      workers: { type: "string", default: "2" },
      "max-running": { type: "string", default: "8" },
      "flood-secs": { type: "string", default: "12" },
      "silent-secs": { type: "string", default: "8" },
      depth: { type: "string", default: "1" },
      "poll-secs": { type: "string", default: "0.5" },
      "light-rate": { type: "string", default: "2" },
      overload: { type: "string", default: "3" },
      "engine-priority": { type: "boolean", default: false },
    },
  });
  return {
    workers: Number(values.workers),
    maxRunning: Number(values["max-running"]),
    floodSecs: Number(values["flood-secs"]),
    silentSecs: Number(values["silent-secs"]),
    depth: Number(values.depth),
    pollSecs: Number(values["poll-secs"]),
    lightRate: Number(values["light-rate"]),
    overload: Number(values.overload),
    enginePriority: values["engine-priority"] === true,
  };
}

async function main(): Promise<void> {
  const o = parse();
  const host = await childFleetHost();
  const light = ["B", "C", "D"];
  try {
    const capacity = await calibrate(host, o);
    const floodRate = capacity * o.overload;
    const lightLoad = (url: string, t0: number, secs: number) =>
      light.map((g, i) =>
        stream(url, LIGHT(g, { "x-tenant-id": `tenant-${g}` }), o.lightRate, secs, t0, i * 97),
      );
    const flood = (url: string, t0: number) => [
      stream(url, HEAVY({ "x-tenant-id": "tenant-A" }), floodRate, o.floodSecs, t0),
      ...lightLoad(url, t0, o.floodSecs),
    ];
    const high = (url: string, t0: number, secs: number) => [
      stream(url, LIGHT("high", { "x-priority": "10" }), o.lightRate * 3, secs, t0, 50),
    ];
    const runs: Run[] = [];
    runs.push(await run(host, o, "silent", false, (u, t0) => lightLoad(u, t0, o.silentSecs)));
    runs.push(await run(host, o, "flood/off", false, flood));
    runs.push(await run(host, o, "flood/on", true, flood));
    runs.push(await run(host, o, "prio-silent", true, (u, t0) => high(u, t0, o.silentSecs)));
    runs.push(
      await run(host, o, "prio-flood/on", true, (u, t0) => [
        stream(u, { ...HEAVY({ "x-priority": "-1" }), group: "low" }, floodRate, o.floodSecs, t0),
        ...high(u, t0, o.floodSecs),
      ]),
    );

    const table = runs.flatMap((r) => rows(r, ["A", ...light, "high", "low"]));
    printTable(
      [
        "run",
        "group",
        "sent",
        "served",
        "429/503+RA",
        "lost",
        "TTFT p50 ms",
        "TTFT p99 ms",
        "fleet tok/s",
      ],
      table.map((x) => [
        x.run,
        x.group,
        x.sent,
        x.served,
        x.refused,
        x.lost,
        fmt(x.p50),
        fmt(x.p99),
        fmt(x.tokensPerSec, 0),
      ]),
    );
    const p99Of = (run: string, groups: string[]) => {
      const r = runs.find((x) => x.name === run) as Run;
      const ttfts = r.outcomes.flatMap((x) =>
        groups.includes(x.group) && x.ttftMs !== undefined ? [x.ttftMs] : [],
      );
      return summarizeMs(ttfts).p99;
    };
    const tokPerSec = (run: string) => {
      const r = runs.find((x) => x.name === run) as Run;
      return r.outcomes.reduce((s, x) => s + x.tokens, 0) / r.spanSecs;
    };
    const silent = p99Of("silent", light);
    const targets = [
      ["B-D p99 TTFT, flood/off ÷ silent", fmt(p99Of("flood/off", light) / silent, 2), "<= 1.5"],
      ["B-D p99 TTFT, flood/on ÷ silent", fmt(p99Of("flood/on", light) / silent, 2), "<= 1.5"],
      [
        "fleet tok/s, flood/on ÷ flood/off",
        fmt(tokPerSec("flood/on") / tokPerSec("flood/off"), 3),
        ">= 0.95",
      ],
      [
        "high p99 TTFT, prio-flood/on ÷ prio-silent",
        fmt(p99Of("prio-flood/on", ["high"]) / p99Of("prio-silent", ["high"]), 2),
        "<= 1.2",
      ],
      [
        "requests lost (neither served nor 429/503 + Retry-After)",
        String(table.reduce((s, x) => s + x.lost, 0)),
        "0",
      ],
    ];
    console.log("");
    printTable(["target", "measured", "goal"], targets);
    mkdirSync(dirname(RESULTS), { recursive: true });
    writeFileSync(
      RESULTS,
      `${JSON.stringify(
        {
          command: commandLine("bench:admission"),
          date: new Date().toISOString(),
          machine: { cpus: os.cpus().length, loadavg: os.loadavg() },
          options: o,
          capacityReqPerSec: capacity,
          table,
          targets,
        },
        null,
        2,
      )}\n`,
    );
    console.log(`\nresults: ${RESULTS}`);
  } finally {
    await host.close();
  }
}

runIfEntryPoint(import.meta.url, main);
