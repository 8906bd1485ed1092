/**
 * The scheduling pipeline's cost per decision (issue 22):
 *
 *   npm run bench:scheduler           (BENCH_QUICK=1 for a smoke run)
 *
 * 1. One profile decision (`SchedulerProfile.select`) with five scorers (prefix-cache, queue,
 *    kv-cache-utilization, active-request, prefill-work) and the max-score picker, over 16 and
 *    256 workers, for an 8k-character prompt: the matched lengths are given (the index's walk is
 *    bench:tree's), the workers carry engine signals as introspection leaves them. Targets:
 *    ≤ 15 µs median at 16 workers, ≤ 60 µs at 256.
 * 2. Each built-in profile's `select`, same fleets, for comparison.
 * 3. The whole `Scheduler.decide` with the five-scorer profile over the shared index (match,
 *    select, insert), 8k prompts from bench/lib/prompts.ts, to set the pipeline against the index.
 *
 * Prints tables and writes bench/results/scheduler.json.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import os from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { mulberry32 } from "../sim/prng.js";
import { SharedIndex } from "../src/index/shared-index.js";
import {
  BUILTIN_PROFILE_CONFIGS,
  type BuiltinProfileName,
  createPolicy,
} from "../src/scheduling/builtin-profiles.js";
import type { SchedulingWorker } from "../src/scheduling/plugin.js";
import type { Policy } from "../src/scheduling/policy.js";
import { Scheduler } from "../src/scheduling/scheduler.js";
import { buildProfiles } from "../src/scheduling/scheduler-config.js";
import { EngineSignals } from "../src/workers/signals.js";
import { commandLine, runIfEntryPoint } from "./lib/entry.js";
import { Workload } from "./lib/prompts.js";
import { printTable, type Summary, summarize } from "./lib/stats.js";

const QUICK = process.env.BENCH_QUICK === "1";
const PROMPT_CHARS = 8192;
const WORKER_COUNTS = [16, 256];
const TARGET_NS: Record<number, number> = { 16: 15_000, 256: 60_000 };
const WARMUP = QUICK ? 2_000 : 20_000;
const MEASURED = QUICK ? 5_000 : 50_000;

/** The five-scorer profile of the target. */
const FIVE_SCORERS = {
  plugins: [
    { type: "prefix-cache-scorer" },
    { type: "queue-scorer" },
    { type: "kv-cache-utilization-scorer" },
    { type: "active-request-scorer" },
    { type: "prefill-work-scorer" },
    { type: "max-score-picker" },
  ],
  schedulingProfiles: [
    {
      name: "five-scorers",
      plugins: [
        { pluginRef: "prefix-cache-scorer", weight: 3 },
        { pluginRef: "queue-scorer", weight: 2 },
        { pluginRef: "kv-cache-utilization-scorer", weight: 2 },
        { pluginRef: "active-request-scorer", weight: 1 },
        { pluginRef: "prefill-work-scorer", weight: 1 },
        { pluginRef: "max-score-picker" },
      ],
    },
  ],
};

interface BenchWorker extends SchedulingWorker {
  inFlight: number;
}

/** Workers with fresh engine signals, as introspection leaves them. */
function fleet(n: number, rng: () => number): BenchWorker[] {
  const now = Date.now();
  return Array.from({ length: n }, (_, i) => {
    const signals = new EngineSignals();
    signals.recordLoad(
      {
        queued: Math.floor(rng() * 6),
        running: Math.floor(rng() * 16),
        kvUsage: rng(),
        routerPending: 1,
      },
      now,
    );
    return {
      id: `worker-${i}`,
      inFlight: Math.floor(rng() * 12),
      pendingPrefillChars: Math.floor(rng() * 20_000),
      pendingPrefillRequests: Math.floor(rng() * 4),
      activeChars: Math.floor(rng() * 80_000),
      servedModels: undefined,
      signals,
      foreignQueuedAt: (at: number) => signals.foreignQueued(at),
    };
  });
}

interface Row extends Summary {
  what: string;
  workers: number;
}

/** Times `policy.select` one decision at a time on a fleet whose loads drift between calls. */
function timeSelect(what: string, policy: Policy, workers: number): Row {
  const rng = mulberry32(4242 + workers);
  const ws = fleet(workers, rng);
  const text = "s".repeat(PROMPT_CHARS);
  const matched = ws.map(() => Math.floor(rng() * PROMPT_CHARS));
  const samples: number[] = [];
  let sink = 0;
  for (let i = 0; i < WARMUP + MEASURED; i++) {
    const w = ws[i % workers]!;
    w.inFlight = (w.inFlight + 1) % 12;
    matched[(i * 7) % workers] = Math.floor(rng() * PROMPT_CHARS);
    const t0 = process.hrtime.bigint();
    const decision = policy.select(ws, { text, matched });
    const ns = Number(process.hrtime.bigint() - t0);
    if (decision !== undefined) sink += decision.worker.inFlight;
    if (i >= WARMUP) samples.push(ns);
  }
  if (sink < 0) console.log(sink);
  return { what, workers, ...summarize(samples) };
}

/** Times the whole decider (shared index match + profile + insert) on seeded 8k prompts. */
function timeDecide(policy: Policy, workers: number): Row {
  const rng = mulberry32(99 + workers);
  const ws = fleet(workers, rng);
  const index = new SharedIndex({ maxTreeSize: 2 ** 24 });
  for (const w of ws) index.addWorker(w.id);
  const decider = new Scheduler(policy, index);
  const workload = new Workload(mulberry32(7 + workers), { promptChars: PROMPT_CHARS });
  const samples: number[] = [];
  const warm = Math.min(WARMUP, 3_000);
  const measured = Math.min(MEASURED, 10_000);
  for (let i = 0; i < warm + measured; i++) {
    const text = workload.next();
    const t0 = process.hrtime.bigint();
    decider.decide(ws, { text });
    const ns = Number(process.hrtime.bigint() - t0);
    if (i >= warm) samples.push(ns);
  }
  return { what: "decider.decide (shared index + five scorers)", workers, ...summarize(samples) };
}

const us = (ns: number) => (ns / 1000).toFixed(2);

async function main(): Promise<void> {
  const machine = `${os.cpus().length} × ${os.cpus()[0]?.model ?? "cpu"}, node ${process.version}`;
  console.log(
    `bench:scheduler — ${new Date().toISOString()} — ${machine}${QUICK ? " — quick" : ""}`,
  );
  const rows: Row[] = [];
  for (const n of WORKER_COUNTS) {
    rows.push(
      timeSelect(
        "five scorers + max-score (select)",
        buildProfiles(FIVE_SCORERS, { random: Math.random })[0]!,
        n,
      ),
    );
  }
  for (const name of Object.keys(BUILTIN_PROFILE_CONFIGS) as BuiltinProfileName[]) {
    for (const n of WORKER_COUNTS) rows.push(timeSelect(`${name} (select)`, createPolicy(name), n));
  }
  for (const n of WORKER_COUNTS)
    rows.push(timeSelect("prefix_cost (select, for reference)", createPolicy("prefix_cost"), n));
  for (const n of WORKER_COUNTS) {
    rows.push(timeDecide(buildProfiles(FIVE_SCORERS, { random: Math.random })[0]!, n));
  }
  printTable(
    ["decision", "workers", "median µs", "p99 µs", "mean µs", "target"],
    rows.map((r) => {
      const target = r.what.startsWith("five scorers") ? TARGET_NS[r.workers] : undefined;
      return [
        r.what,
        r.workers,
        us(r.medianNs),
        us(r.p99Ns),
        us(r.meanNs),
        target === undefined ? "" : `≤ ${us(target)} → ${r.medianNs <= target ? "met" : "MISSED"}`,
      ];
    }),
  );
  const dir = join(dirname(fileURLToPath(import.meta.url)), "results");
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, "scheduler.json"),
    `${JSON.stringify({ benchmark: "scheduler", date: new Date().toISOString(), machine, command: commandLine("bench:scheduler"), quick: QUICK, promptChars: PROMPT_CHARS, rows }, null, 2)}\n`,
  );
}

runIfEntryPoint(import.meta.url, main);
