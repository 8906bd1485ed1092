/**
 * Body stall: how long the router's event loop stops serving everyone else while it parses one
 * huge request body. A probe asks GET /health one request at a time, back to back, while a chat
 * body of many small messages (the shape of issue 10 item 1: 62.5 MB, 1.8 million messages) goes
 * through the router (its own process) to one simulated worker (another process). Two settings:
 * "in line" (--parse-workers 0, every body parsed on the event loop, as before the parse pool)
 * and "parse workers" (the defaults: bodies of at least --parse-offload-bytes go to a worker
 * thread). The simulated worker answers such a prompt with 400 (longer than its context
 * length, as a real engine would); the router's work, the stall measured here, is the same.
 *
 *   npm run bench:body-stall                   sizes 1, 8 and 62.5 MB, 3 runs each
 *   npm run bench:body-stall -- --quick        1 and 8 MB, 1 run
 *
 * Prints a table and writes bench/results/body-stall.json.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import os from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { configWith, defaultConfig } from "../src/config.js";
import { commandLine, runIfEntryPoint } from "./lib/entry.js";
import { childFleetHost } from "./lib/fleet.js";
import { summarizeMs } from "./lib/latency.js";
import { startRouterProcess } from "./lib/router-process.js";
import { printTable } from "./lib/stats.js";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const RESULTS = join(ROOT, "bench", "results", "body-stall.json");

/** Bytes of one small message as JSON, `{"role":"user","content":"m1234567"},` and so on. */
const MESSAGE_BYTES = 38;

interface StallResult {
  mode: string;
  bodyMB: number;
  messages: number;
  /** The huge request, from send to full answer (status in `status`). */
  requestMs: number;
  status: number;
  /** /health latencies while the huge request was in flight. */
  healthProbes: number;
  healthMaxMs: number;
  healthP50Ms: number;
  /** /health latency with nothing else going on (median and max of 200 probes). */
  idleHealthMs: number;
  idleHealthMaxMs: number;
}

/** The body, encoded before the measurement: the probe shares this process's event loop. */
function chatBody(targetBytes: number): { body: Buffer; messages: number } {
  const messages = Math.ceil(targetBytes / MESSAGE_BYTES);
  const parts: string[] = [];
  for (let i = 0; i < messages; i++) {
    parts.push(`{"role":"user","content":"m${String(i).padStart(7, "0")}"}`);
  }
  return { body: Buffer.from(`{"max_tokens":1,"messages":[${parts.join(",")}]}`), messages };
}

async function health(url: string): Promise<number> {
  const started = performance.now();
  const res = await fetch(`${url}/health`);
  await res.arrayBuffer();
  return performance.now() - started;
}

async function measure(
  url: string,
  mode: string,
  body: Buffer,
  messages: number,
): Promise<StallResult> {
  // Idle baseline under the same machine load: a stall is what exceeds this.
  const idleSamples: number[] = [];
  for (let i = 0; i < 200; i++) idleSamples.push(await health(url));
  const idle = summarizeMs(idleSamples);

  let done = false;
  const probes: number[] = [];
  const probing = (async () => {
    while (!done) probes.push(await health(url));
  })();
  const started = performance.now();
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body,
  });
  await res.arrayBuffer();
  const requestMs = performance.now() - started;
  done = true;
  await probing;
  const during = summarizeMs(probes);
  return {
    mode,
    bodyMB: Number((body.byteLength / 1e6).toFixed(1)),
    messages,
    requestMs: Math.round(requestMs),
    status: res.status,
    healthProbes: probes.length,
    healthMaxMs: Number(during.max.toFixed(1)),
    healthP50Ms: Number(during.p50.toFixed(1)),
    idleHealthMs: Number(idle.p50.toFixed(1)),
    idleHealthMaxMs: Number(idle.max.toFixed(1)),
  };
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { quick: { type: "boolean", default: false } } });
  const sizes = values.quick ? [1e6, 8e6] : [1e6, 8e6, 62.5e6];
  const runs = values.quick ? 1 : 3;
  const host = await childFleetHost();
  const fleet = await host.startFleet({
    count: 1,
    worker: { timeScale: 0, kvCapacityTokens: 100_000_000 },
  });
  const workerUrl = fleet.workers[0]?.url as string;
  const results: StallResult[] = [];
  try {
    for (const [mode, parseWorkers] of [
      ["in line", 0],
      ["parse workers", defaultConfig().intake.parseWorkers],
    ] as const) {
      const router = await startRouterProcess(
        configWith({
          host: "127.0.0.1",
          port: 0,
          workerUrls: [workerUrl],
          healthCheckIntervalSecs: 0,
          parseWorkers,
        }),
      );
      try {
        for (const size of sizes) {
          const { body, messages } = chatBody(size);
          for (let run = 0; run < runs; run++) {
            const r = await measure(router.url, mode, body, messages);
            results.push(r);
            console.error(
              `${mode} ${r.bodyMB} MB run ${run + 1}: /health max ${r.healthMaxMs} ms, request ${r.requestMs} ms (${r.status})`,
            );
          }
        }
      } finally {
        await router.stop();
      }
    }
  } finally {
    await fleet.close();
    await host.close();
  }

  printTable(
    [
      "mode",
      "body MB",
      "messages",
      "request ms",
      "status",
      "/health max ms",
      "/health p50 ms",
      "probes",
      "idle /health p50 ms",
      "idle /health max ms",
    ],
    results.map((r) => [
      r.mode,
      String(r.bodyMB),
      String(r.messages),
      String(r.requestMs),
      String(r.status),
      String(r.healthMaxMs),
      String(r.healthP50Ms),
      String(r.healthProbes),
      String(r.idleHealthMs),
      String(r.idleHealthMaxMs),
    ]),
  );
  mkdirSync(dirname(RESULTS), { recursive: true });
  writeFileSync(
    RESULTS,
    JSON.stringify(
      {
        command: commandLine("bench:body-stall"),
        date: new Date().toISOString(),
        node: process.version,
        cpus: os.cpus().length,
        results,
      },
      null,
      2,
    ),
  );
  console.error(`wrote ${RESULTS}`);
}

runIfEntryPoint(import.meta.url, main);
