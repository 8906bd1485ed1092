/**
 * LoRA residency (docs/scheduling.md, "LoRA residency"): 32 adapters over 4 simulated vLLM
 * workers that each list all 32 and keep 4 loaded (--max-loras 4), a load costing
 * LOAD_MS model ms; adapter popularity Zipf(1). The same requests through three routers in turn,
 * each on a fresh fleet: least_load (any worker listing the adapter), cache_aware (the default),
 * and a scheduler profile with lora-affinity-scorer (residency-aware) and queue-scorer. Compared
 * on adapter loads per 1,000 requests, mean TTFT and the fleet's prefix-cache hit rate.
 *
 *   npm run bench:lora [-- --requests 600 --concurrency 16]
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { mulberry32, randomInt } from "../sim/prng.js";
import { type SimWorker, startSimWorker } from "../sim/worker.js";
import { randomText } from "../sim/workloads.js";
import { createLogger } from "../src/logger.js";
import { startRouter } from "../src/server.js";
import { runIfEntryPoint } from "./lib/entry.js";
import { type LoadJob, loadAgent, runLoad } from "./lib/load.js";
import { routerConfig } from "./lib/routing-runner.js";

const WORKERS = 4;
const ADAPTERS = 32;
const MAX_LORAS = 4;
const LOAD_MS = 200;
const TIME_SCALE = 0.2;

const RESIDENCY_PROFILE = {
  plugins: [
    { type: "model-filter" },
    { type: "lora-affinity-scorer", parameters: { loadScore: 0 } },
    { type: "queue-scorer" },
    { type: "max-score-picker" },
  ],
  schedulingProfiles: [
    {
      name: "lora_residency",
      plugins: [
        { pluginRef: "model-filter" },
        { pluginRef: "lora-affinity-scorer", weight: 2 },
        { pluginRef: "queue-scorer", weight: 1 },
        { pluginRef: "max-score-picker" },
      ],
    },
  ],
};

interface Row {
  row: string;
  loadsPer1000: number;
  ttftMeanMs: number;
  hitRate: number;
  errors: number;
}

async function runRow(
  row: string,
  requests: { adapter: string; prompt: string }[],
  concurrency: number,
): Promise<Row> {
  const names = Array.from({ length: ADAPTERS }, (_, i) => `adapter-${i}`);
  const sims: SimWorker[] = await Promise.all(
    Array.from({ length: WORKERS }, (_, i) =>
      startSimWorker({
        id: `w${i}`,
        flavor: "vllm",
        timeScale: TIME_SCALE,
        loraAdapters: names,
        maxLoras: MAX_LORAS,
        loraLoadMs: LOAD_MS,
      }),
    ),
  );
  const urls = sims.map((s) => s.url);
  let schedulerConfig = "";
  if (row === "lora_residency") {
    const dir = mkdtempSync(join(os.tmpdir(), "bench-lora-"));
    schedulerConfig = join(dir, "profile.json");
    writeFileSync(schedulerConfig, JSON.stringify(RESIDENCY_PROFILE));
  }
  const policy = row === "least_load" ? "least_load" : "cache_aware";
  const router = await startRouter(routerConfig(policy, urls, { schedulerConfig }), {
    logger: createLogger({ level: "silent" }),
  });
  // The router reads each worker's /v1/models (the adapters it lists) before the first request.
  await new Promise((r) => setTimeout(r, 1500));
  const dispatcher = loadAgent(concurrency);
  try {
    const jobs: LoadJob[] = requests.map((r, i) => ({
      key: String(i),
      request: {
        origin: router.url,
        path: "/v1/completions",
        body: JSON.stringify({
          model: r.adapter,
          prompt: r.prompt,
          max_tokens: 16,
          stream: true,
          stream_options: { include_usage: true },
        }),
        stream: true,
      },
    }));
    const run = await runLoad(jobs, { dispatcher, concurrency });
    const ok = run.outcomes.filter((o) => o.ok);
    const stats = sims.map((s) => s.stats());
    const loads = stats.reduce((n, s) => n + (s.loraLoads ?? 0), 0);
    const prompt = stats.reduce((n, s) => n + s.promptTokens, 0);
    const cached = stats.reduce((n, s) => n + s.cachedTokens, 0);
    return {
      row,
      loadsPer1000: (1000 * loads) / requests.length,
      ttftMeanMs: ok.reduce((n, o) => n + o.ttftMs, 0) / Math.max(1, ok.length),
      hitRate: prompt === 0 ? 0 : cached / prompt,
      errors: run.outcomes.length - ok.length,
    };
  } finally {
    await dispatcher.close();
    await router.stop(1000);
    await Promise.all(sims.map((s) => s.close()));
  }
}

/** Zipf(1) over the adapters; each request's prompt: the adapter's own system prompt + a question. */
function workload(count: number, seed: number) {
  const rng = mulberry32(seed);
  const weights = Array.from({ length: ADAPTERS }, (_, k) => 1 / (k + 1));
  const total = weights.reduce((a, b) => a + b, 0);
  const systems = Array.from({ length: ADAPTERS }, () => randomText(rng, 256));
  return Array.from({ length: count }, () => {
    let x = rng() * total;
    let k = 0;
    while (k < ADAPTERS - 1 && x >= weights[k]!) x -= weights[k++]!;
    return {
      adapter: `adapter-${k}`,
      prompt: `${systems[k]}\n${randomText(rng, 32 + randomInt(rng, 32))}`,
    };
  });
}

export async function main(argv = process.argv.slice(2)): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      requests: { type: "string", default: "600" },
      concurrency: { type: "string", default: "16" },
      seed: { type: "string", default: "42" },
    },
  });
  const count = Number(values.requests);
  const concurrency = Number(values.concurrency);
  const requests = workload(count, Number(values.seed));
  console.log(
    `bench:lora — ${new Date().toISOString()} — load average ${os
      .loadavg()
      .map((l) => l.toFixed(1))
      .join(" ")}`,
  );
  console.log(
    `${count} requests, concurrency ${concurrency}, ${ADAPTERS} adapters Zipf(1) over ${WORKERS} vLLM workers keeping ${MAX_LORAS} loaded, load ${LOAD_MS} model ms, timeScale ${TIME_SCALE}`,
  );
  const rows: Row[] = [];
  for (const row of ["least_load", "cache_aware", "lora_residency"]) {
    rows.push(await runRow(row, requests, concurrency));
  }
  console.log("\n           row  loads/1000  TTFT mean ms  hit rate  errors");
  for (const r of rows) {
    console.log(
      `${r.row.padStart(14)}  ${r.loadsPer1000.toFixed(0).padStart(10)}  ${r.ttftMeanMs.toFixed(1).padStart(12)}  ${(100 * r.hitRate).toFixed(1).padStart(7)}%  ${String(r.errors).padStart(6)}`,
    );
  }
  const base = rows[0]!;
  const aware = rows[2]!;
  const loads = 1 - aware.loadsPer1000 / Math.max(1e-9, base.loadsPer1000);
  const ttft = 1 - aware.ttftMeanMs / base.ttftMeanMs;
  console.log(
    `goal: residency-aware beats any-worker-listing-it by ≥ 30% on loads and mean TTFT: loads ${(100 * loads).toFixed(0)}% fewer, TTFT ${(100 * ttft).toFixed(0)}% lower → ${loads >= 0.3 && ttft >= 0.3 ? "met" : "MISSED"}`,
  );
}

runIfEntryPoint(import.meta.url, () => main());
