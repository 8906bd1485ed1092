/**
 * LoRA residency (docs/scheduling.md, "LoRA residency"): 32 adapters over 4 simulated vLLM
 * workers that each list all 32 and keep 4 loaded (--max-loras 4), a load costing
 * LOAD_MS model ms; adapter popularity Zipf(1). The same requests through each router in turn,
 * each on a fresh fleet: least_load (any worker listing the adapter), prefix_cost with the load
 * cost off (residency-blind), prefix_cost as it comes (the default policy, residency-aware),
 * prefix_cost with the load cost set to what a load takes here, and a scheduler profile of
 * lora-affinity-scorer with queue-scorer. Compared on adapter loads per 1,000 requests, mean TTFT
 * and the fleet's prefix-cache hit rate.
 *
 * At equal hit rate: each adapter's requests share its system prompt, and the KV of an adapter is
 * its own, so a router that keeps an adapter on fewer workers also prefills its prompt fewer times
 * (4 cold prefills per adapter spread over every worker, 1 kept on one): that, not residency, made
 * the hit rates differ by 4-14 points. Before each row every worker prefills every adapter's
 * system prompt once (warm-up, not counted), so every row starts with every prefix cached
 * everywhere (the caches hold them all many times over) and the measured hit rates differ only by
 * noise: what is left to differ is where the adapters are loaded.
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
/** The simulator's prefill rate (sim/timing.ts) and its tokens' characters: a load in characters. */
const PREFILL_TOKENS_PER_SEC = 30_000;
const CHARS_PER_TOKEN = 4;
const LOAD_CHARS = (LOAD_MS / 1000) * PREFILL_TOKENS_PER_SEC * CHARS_PER_TOKEN;

const ROWS = [
  "least_load",
  "prefix_cost_blind",
  "prefix_cost",
  "prefix_cost_load",
  "lora_residency",
] as const;
type RowName = (typeof ROWS)[number];

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
  row: RowName,
  requests: { adapter: string; prompt: string }[],
  systems: readonly string[],
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
  const policy = row === "least_load" ? "least_load" : "prefix_cost";
  const loadChars =
    row === "prefix_cost_blind" ? 0 : row === "prefix_cost_load" ? LOAD_CHARS : undefined;
  const router = await startRouter(
    routerConfig(policy, urls, {
      schedulerConfig,
      ...(loadChars !== undefined ? { prefixCostLoraLoadChars: loadChars } : {}),
    }),
    { logger: createLogger({ level: "silent" }) },
  );
  await warmUp(sims, names, systems);
  const before = sims.map((s) => s.stats());
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
    // What the measured requests did: the counters since the warm-up.
    const stats = sims.map((s) => s.stats());
    const delta = (f: (s: (typeof stats)[number]) => number) =>
      stats.reduce((n, s, i) => n + f(s) - f(before[i]!), 0);
    const loads = delta((s) => s.loraLoads ?? 0);
    const prompt = delta((s) => s.promptTokens);
    const cached = delta((s) => s.cachedTokens);
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

/**
 * Every worker prefills every adapter's system prompt once, straight to the worker (the router
 * does not see it), the workers side by side and the adapters in the same order on each.
 */
async function warmUp(sims: SimWorker[], names: string[], systems: readonly string[]) {
  await Promise.all(
    sims.map(async (sim) => {
      for (let k = 0; k < names.length; k++) {
        const res = await fetch(`${sim.url}/v1/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ model: names[k], prompt: `${systems[k]}\nwarm`, max_tokens: 1 }),
        });
        if (res.status !== 200) throw new Error(`warm-up: ${sim.id} answered ${res.status}`);
        await res.arrayBuffer();
      }
    }),
  );
}

/** Zipf(1) over the adapters; each request's prompt: the adapter's own system prompt + a question. */
function workload(count: number, seed: number) {
  const rng = mulberry32(seed);
  const weights = Array.from({ length: ADAPTERS }, (_, k) => 1 / (k + 1));
  const total = weights.reduce((a, b) => a + b, 0);
  const systems = Array.from({ length: ADAPTERS }, () => randomText(rng, 256));
  const requests = Array.from({ length: count }, () => {
    let x = rng() * total;
    let k = 0;
    while (k < ADAPTERS - 1 && x >= weights[k]!) x -= weights[k++]!;
    return {
      adapter: `adapter-${k}`,
      prompt: `${systems[k]}\n${randomText(rng, 32 + randomInt(rng, 32))}`,
    };
  });
  return { requests, systems };
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
  const { requests, systems } = workload(count, Number(values.seed));
  console.log(
    `bench:lora — ${new Date().toISOString()} — load average ${os
      .loadavg()
      .map((l) => l.toFixed(1))
      .join(" ")}`,
  );
  console.log(
    `${count} requests, concurrency ${concurrency}, ${ADAPTERS} adapters Zipf(1) over ${WORKERS} vLLM workers keeping ${MAX_LORAS} loaded, load ${LOAD_MS} model ms (prefix_cost_load: --prefix-cost-lora-load-chars ${LOAD_CHARS}), timeScale ${TIME_SCALE}; every prefix warmed on every worker first`,
  );
  const rows: Row[] = [];
  for (const row of ROWS) rows.push(await runRow(row, requests, systems, concurrency));
  console.log("\n              row  loads/1000  TTFT mean ms  hit rate  errors");
  for (const r of rows) {
    console.log(
      `${r.row.padStart(17)}  ${r.loadsPer1000.toFixed(0).padStart(10)}  ${r.ttftMeanMs.toFixed(1).padStart(12)}  ${(100 * r.hitRate).toFixed(1).padStart(7)}%  ${String(r.errors).padStart(6)}`,
    );
  }
  const base = rows[0]!;
  for (const aware of rows.slice(2)) {
    const loads = 1 - aware.loadsPer1000 / Math.max(1e-9, base.loadsPer1000);
    const ttft = 1 - aware.ttftMeanMs / base.ttftMeanMs;
    const points = 100 * Math.abs(aware.hitRate - base.hitRate);
    const met = loads >= 0.3 && ttft >= 0.3 && points <= 1;
    console.log(
      `goal (${aware.row} vs ${base.row}): ≥ 30% fewer loads and lower mean TTFT at a hit rate within 1 point: loads ${(100 * loads).toFixed(0)}% fewer, TTFT ${(100 * ttft).toFixed(0)}% lower, hit rate ${points.toFixed(1)} points apart → ${met ? "met" : "MISSED"}`,
    );
  }
}

runIfEntryPoint(import.meta.url, () => main());
