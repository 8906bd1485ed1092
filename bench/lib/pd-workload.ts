/**
 * The PD workload of bench:routing (issue 25): a disaggregated fleet of simulated SGLang prefill
 * and decode workers behind the real router in PD mode, the same seeded shared-prefix requests
 * through it once per prefill policy, side by side: the prefix-aware choices (prefix_cost, the
 * default; cache_aware) against round_robin. The decode side uses the router's default decode
 * policy (least_load) in every row. Measured: the prefill workers' own prefix-cache hit rate (the
 * prefix cache lives there), client-side TTFT (which includes the hand-off: the decode worker's
 * first token waits for the prefill and the KV transfer), end-to-end latency and throughput.
 *
 *   npm run bench:routing -- --workload pd [--quick] [--repeats n] [--policies a,b]
 */
import { mkdirSync, writeFileSync } from "node:fs";
import os from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { CHARS_PER_TOKEN } from "../../sim/tokenizer.js";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import { promptTextOf } from "../../sim/workloads.js";
import type { AccountTotals } from "../../src/cache-account/account-totals.js";
import { configWith } from "../../src/config.js";
import { createLogger } from "../../src/logger.js";
import { POLICY_NAMES, type PolicyName } from "../../src/scheduling/policy.js";
import { startRouter } from "../../src/server.js";
import { fmt, type LatencySummary, summarizeMs } from "./latency.js";
import { loadAgent, type RequestOutcome, runLoad } from "./load.js";
import { numberFlag } from "./number-flag.js";
import { combineAccounts, printAccountTable, routersAccount } from "./routing-account.js";
import { requestFor } from "./routing-runner.js";
import {
  FULL_PRESET,
  prepareWorkload,
  QUICK_PRESET,
  type RoutingPreset,
} from "./routing-workloads.js";
import { printTable } from "./stats.js";

const DEFAULT_ROWS: PolicyName[] = ["prefix_cost", "cache_aware", "round_robin"];

export interface PdRow {
  prefillPolicy: PolicyName;
  repeat: number;
  requests: number;
  errors: number;
  firstError: string | undefined;
  /** Σ cached / Σ prompt tokens over the prefill workers' own counters. */
  prefillHitRate: number;
  ttftMs: LatencySummary;
  e2eMs: LatencySummary;
  requestsPerSec: number;
  /** Requests per prefill worker. */
  perPrefill: number[];
  /** The router's cache account of the row (the prefill side's choice: src/cache-account/). */
  account?: AccountTotals | undefined;
}

interface PdOptions {
  preset: RoutingPreset;
  prefillWorkers: number;
  decodeWorkers: number;
  rows: PolicyName[];
  repeats: number;
  quick: boolean;
}

/** A whole number ≥ min from a flag, or the default when the flag is absent; else a clear error. */
function count(flag: string, raw: string | undefined, fallback: number, min: number): number {
  return numberFlag(flag, raw, min, true) ?? fallback;
}

/**
 * --policies for the PD rows: known policy names only (each row is a --prefill-policy). A name
 * that is not one was cast and passed on before, so a typo gave no row instead of an error.
 */
export function parsePdPolicies(raw: string | undefined): PolicyName[] {
  if (raw === undefined) return [...DEFAULT_ROWS];
  const names = raw.split(",").map((p) => p.trim());
  for (const p of names) {
    if (!(POLICY_NAMES as readonly string[]).includes(p)) {
      throw new Error(
        `--policies (--workload pd): unknown prefill policy "${p}"; expected some of ${POLICY_NAMES.join(",")}`,
      );
    }
  }
  return names as PolicyName[];
}

export function parsePdCli(argv: string[]): PdOptions {
  const { values } = parseArgs({
    args: argv,
    options: {
      workload: { type: "string" },
      quick: { type: "boolean", default: false },
      repeats: { type: "string" },
      policies: { type: "string" },
      concurrency: { type: "string" },
      "prefill-workers": { type: "string" },
      "decode-workers": { type: "string" },
    },
  });
  const preset = pdPreset(values.quick);
  preset.concurrency = count("concurrency", values.concurrency, preset.concurrency, 1);
  return {
    preset,
    prefillWorkers: count("prefill-workers", values["prefill-workers"], preset.workers, 1),
    decodeWorkers: count("decode-workers", values["decode-workers"], 2, 1),
    rows: parsePdPolicies(values.policies),
    repeats: count("repeats", values.repeats, 3, 1),
    quick: values.quick,
  };
}

/**
 * Shared-prefix requests shaped for a disaggregated fleet: long system prompts (prefill is the
 * work a prefix hit saves) and short answers, engines in real time. The reused working set (the
 * system prompts) is about half the prefill side's KV: it fits when each prefill worker keeps its
 * own share of the prefixes, not when every prefix lands on every worker.
 */
function pdPreset(quick: boolean): RoutingPreset {
  const preset = structuredClone(quick ? QUICK_PRESET : FULL_PRESET);
  preset.name = quick ? "pd-quick" : "pd";
  preset.timeScale = 1;
  preset.concurrency = 8;
  preset.kvCapacityTokens = quick ? 20_000 : 40_000;
  preset.sharedPrefix = {
    groups: quick ? 8 : 16,
    promptsPerGroup: quick ? 6 : 12,
    systemPromptTokens: 4096,
    questionTokens: 128,
    outputTokens: 16,
  };
  return preset;
}

async function runRow(o: PdOptions, policy: PolicyName, repeat: number): Promise<PdRow> {
  const { preset } = o;
  const workload = prepareWorkload("shared-prefix", preset);
  const common = { timeScale: preset.timeScale, kvCapacityTokens: workload.kvCapacityTokens };
  const prefill: SimWorker[] = [];
  const decode: SimWorker[] = [];
  for (let i = 0; i < o.prefillWorkers; i++) {
    prefill.push(await startSimWorker({ ...common, id: `p${i + 1}`, role: "prefill" }));
  }
  // Decode workers hold every running sequence's KV (room for all of them at once, so the
  // hand-off is never refused): their cache is not what is measured.
  const longest = Math.max(
    ...workload.specs.map((s) => Math.ceil(promptTextOf(s).length / CHARS_PER_TOKEN) + s.maxTokens),
  );
  const decodeKv = Math.max(workload.kvCapacityTokens, preset.concurrency * longest * 2);
  for (let i = 0; i < o.decodeWorkers; i++) {
    decode.push(
      await startSimWorker({
        ...common,
        kvCapacityTokens: decodeKv,
        id: `d${i + 1}`,
        role: "decode",
      }),
    );
  }
  const router = await startRouter(
    configWith({
      host: "127.0.0.1",
      port: 0,
      logLevel: "silent",
      pdDisaggregation: true,
      prefill: prefill.map((p) => ({ url: p.url, bootstrapPort: p.bootstrapPort ?? null })),
      decode: decode.map((d) => d.url),
      prefillPolicy: policy,
    }),
    { logger: createLogger({ level: "silent" }) },
  );
  const agent = loadAgent(preset.concurrency);
  try {
    const jobs = workload.specs.map((spec) => ({
      key: spec.id,
      request: requestFor(spec, router.url),
    }));
    const run = await runLoad(jobs, { dispatcher: agent, concurrency: preset.concurrency });
    const ok = run.outcomes.filter((x: RequestOutcome) => x.ok);
    const failed = run.outcomes.filter((x: RequestOutcome) => !x.ok);
    let promptTokens = 0;
    let cachedTokens = 0;
    for (const p of prefill) {
      promptTokens += p.stats().promptTokens;
      cachedTokens += p.stats().cachedTokens;
    }
    return {
      prefillPolicy: policy,
      repeat,
      requests: run.outcomes.length,
      errors: failed.length,
      firstError: failed[0]?.error,
      prefillHitRate: promptTokens === 0 ? 0 : cachedTokens / promptTokens,
      ttftMs: summarizeMs(ok.map((x) => x.ttftMs)),
      e2eMs: summarizeMs(ok.map((x) => x.e2eMs)),
      requestsPerSec: (ok.length * 1000) / run.wallMs,
      perPrefill: prefill.map((p) => p.stats().requests),
      account: routersAccount([router]),
    };
  } finally {
    await agent.close();
    await router.stop(1000);
    await Promise.all([...prefill, ...decode].map((w) => w.close()));
  }
}

export async function pdMain(argv: string[], command: string): Promise<void> {
  const o = parsePdCli(argv);
  const workload = prepareWorkload("shared-prefix", o.preset);
  console.log(
    `PD workload (${o.preset.name} preset): ${workload.description}; ${o.prefillWorkers} prefill + ${o.decodeWorkers} decode SGLang simulators, concurrency ${o.preset.concurrency}, ${o.repeats} repeats (rows interleaved)`,
  );
  const results: PdRow[] = [];
  // One unrecorded run first: the first row of a process would pay the JIT warm-up alone.
  await runRow(o, o.rows[0]!, -1);
  for (let r = 0; r < o.repeats; r++) {
    for (const policy of o.rows) {
      const row = await runRow(o, policy, r);
      results.push(row);
      console.log(
        `  repeat ${r + 1} ${policy}: hit ${(row.prefillHitRate * 100).toFixed(1)}%, TTFT mean ${fmt(row.ttftMs.mean)} ms, errors ${row.errors}`,
      );
    }
  }
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  const table = o.rows.map((policy) => {
    const rows = results.filter((x) => x.prefillPolicy === policy);
    return [
      policy,
      `${(mean(rows.map((x) => x.prefillHitRate)) * 100).toFixed(1)}%`,
      fmt(mean(rows.map((x) => x.ttftMs.mean))),
      fmt(mean(rows.map((x) => x.ttftMs.p50))),
      fmt(mean(rows.map((x) => x.ttftMs.p90))),
      fmt(mean(rows.map((x) => x.e2eMs.mean))),
      fmt(mean(rows.map((x) => x.requestsPerSec))),
      rows.reduce((n, x) => n + x.errors, 0),
      rows.at(-1)!.perPrefill.join("/"),
    ];
  });
  printTable(
    [
      "prefill policy",
      "prefill hit",
      "TTFT mean",
      "TTFT p50",
      "TTFT p90",
      "e2e mean",
      "req/s",
      "errors",
      "per prefill (last)",
    ],
    table,
  );
  printAccountTable(
    o.rows.map((policy) => {
      const rows = results.filter((x) => x.prefillPolicy === policy);
      return {
        row: policy,
        requests: rows.reduce((n, x) => n + x.requests, 0),
        account: combineAccounts(rows.map((x) => x.account)),
      };
    }),
  );
  const dir = join(import.meta.dirname, "..", "results");
  mkdirSync(dir, { recursive: true });
  const path = join(dir, `routing-pd${o.quick ? "-quick" : ""}.json`);
  writeFileSync(
    path,
    JSON.stringify(
      {
        command,
        date: new Date().toISOString(),
        machine: { cpus: os.cpus().length, model: os.cpus()[0]?.model, node: process.version },
        preset: o.preset.name,
        prefillWorkers: o.prefillWorkers,
        decodeWorkers: o.decodeWorkers,
        results,
      },
      null,
      2,
    ),
  );
  console.log(`wrote ${path}`);
}
