/**
 * The relay's own cost per chunk, A/B (issue 23 item 2): one engine stand-in writes S streams of
 * N small SSE events each as fast as it may (each event its own HTTP chunk, so a proxy handles
 * every one however the reads coalesce), and the client reads as fast as it can. Socket reads
 * and writes are shared by many events here, so the CPU per event is mostly the proxy's work per
 * chunk (bench:stream's paced streams add a syscall per chunk, where the kernel dominates and the
 * machine's load moves the batching). Rows: nginx, the bare Node.js proxy, the router built from
 * --base REF, and this checkout's router, interleaved in rounds; CPU from /proc.
 *
 *   npm run bench:relay-chunks -- --base 7023306
 *   npm run bench:relay-chunks -- --base main --streams 8 --events 100000 --rounds 7
 *
 * Prints the median CPU µs per event of each row and the medians of the per-round ratios;
 * writes bench/results/relay-chunks.json.
 */
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { Agent, createServer, request } from "node:http";
import type { AddressInfo } from "node:net";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { startBareNodeProxy } from "./lib/bare-node-proxy.js";
import { buildRef } from "./lib/build-ref.js";
import { startBuiltRouter } from "./lib/built-router.js";
import { commandLine, runIfEntryPoint } from "./lib/entry.js";
import { fmt } from "./lib/latency.js";
import { ensureNginx, startNginx } from "./lib/nginx.js";
import { processCpuMicros } from "./lib/process-cpu.js";
import { printTable } from "./lib/stats.js";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const RESULTS = join(ROOT, "bench", "results", "relay-chunks.json");

/** An OpenAI chat chunk as engines send them, ~190 bytes. */
function event(i: number): Buffer {
  return Buffer.from(
    `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1764000000,"model":"m","choices":[{"index":0,"delta":{"content":" token${i % 1000}"},"logprobs":null,"finish_reason":null}]}\n\n`,
  );
}

/** The engine stand-in: POST streams `events` events as fast as back-pressure allows. */
async function startEngine(events: number) {
  const bodies = Array.from({ length: 1000 }, (_, i) => event(i));
  const server = createServer((req, res) => {
    if (req.method !== "POST") {
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
      return;
    }
    req.resume();
    req.on("end", () => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      let i = 0;
      const pump = () => {
        while (i < events) {
          if (!res.write(bodies[i++ % bodies.length]!)) return void res.once("drain", pump);
        }
        res.end("data: [DONE]\n\n");
      };
      pump();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  };
}

/** S streams through `url` at once; resolves with the bytes received. */
function load(url: string, streams: number, agent: Agent): Promise<number> {
  const one = () =>
    new Promise<number>((resolve, reject) => {
      const req = request(`${url}/v1/chat/completions`, {
        method: "POST",
        agent,
        headers: { "content-type": "application/json" },
      });
      req.on("error", reject);
      req.on("response", (res) => {
        let bytes = 0;
        res.on("data", (b: Buffer) => {
          bytes += b.length;
        });
        res.on("end", () => resolve(bytes));
        res.on("error", reject);
      });
      req.end(
        JSON.stringify({ model: "m", stream: true, messages: [{ role: "user", content: "hi" }] }),
      );
    });
  return Promise.all(Array.from({ length: streams }, one)).then((b) => b.reduce((x, y) => x + y));
}

function median(values: readonly number[]): number {
  const v = [...values].sort((a, b) => a - b);
  const mid = Math.floor(v.length / 2);
  return v.length % 2 === 1 ? v[mid]! : (v[mid - 1]! + v[mid]!) / 2;
}

interface Row {
  name: string;
  url: string;
  pid: number;
  stop: () => Promise<void>;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      base: { type: "string" },
      streams: { type: "string", default: "4" },
      events: { type: "string", default: "50000" },
      rounds: { type: "string", default: "5" },
    },
  });
  const streams = Number(values.streams);
  const events = Number(values.events);
  const rounds = Number(values.rounds);
  const engine = await startEngine(events);
  const rows: Row[] = [];
  const built = values.base === undefined ? undefined : buildRef(values.base);
  const agent = new Agent({ keepAlive: true, maxSockets: Number.POSITIVE_INFINITY });
  const cpu: Record<string, number[]> = {};
  try {
    if (ensureNginx("bench:relay-chunks") !== undefined) {
      const nginx = await startNginx([engine.url]);
      if (nginx !== undefined)
        rows.push({
          name: "nginx",
          url: nginx.url,
          pid: nginx.workerPid() ?? -1,
          stop: nginx.stop,
        });
    }
    const bare = await startBareNodeProxy(engine.url);
    rows.push({ name: "bare", ...bare });
    const flags = ["--worker-urls", engine.url];
    if (built !== undefined) {
      const base = await startBuiltRouter(flags, [], built.cli);
      rows.push({ name: `base ${values.base}`, ...base });
    }
    const router = await startBuiltRouter(flags);
    rows.push({ name: "router", ...router });
    // Warm-up: every row's code paths once.
    for (const row of rows) await load(row.url, streams, agent);
    for (let round = 0; round < rounds; round++) {
      const order = rows.map((_, i) => rows[(i + round) % rows.length]!);
      for (const row of order) {
        const before = processCpuMicros(row.pid) ?? Number.NaN;
        await load(row.url, streams, agent);
        const used = (processCpuMicros(row.pid) ?? Number.NaN) - before;
        cpu[row.name] ??= [];
        cpu[row.name]!.push(used / (streams * events));
      }
      console.log(
        `round ${round + 1}/${rounds}: ${rows.map((r) => `${r.name} ${cpu[r.name]!.at(-1)!.toFixed(2)}`).join(", ")} µs/event`,
      );
    }
  } finally {
    agent.destroy();
    for (const row of rows) await row.stop();
    engine.close();
    if (built !== undefined) rmSync(built.dir, { recursive: true, force: true });
  }
  const ratio = (a: string, b: string) =>
    cpu[a] && cpu[b] ? median(cpu[a].map((x, i) => x / cpu[b]![i]!)) : Number.NaN;
  const baseName = rows.find((r) => r.name.startsWith("base"))?.name;
  console.log(`\n${streams} streams × ${events} events, ${rounds} rounds; medians`);
  printTable(
    ["row", "cpu µs/event", "×nginx", "×bare", "×base"],
    rows.map((r) => [
      r.name,
      fmt(median(cpu[r.name] ?? []), 2),
      fmt(ratio(r.name, "nginx"), 2),
      fmt(ratio(r.name, "bare"), 2),
      baseName === undefined ? "-" : fmt(ratio(r.name, baseName), 2),
    ]),
  );
  mkdirSync(dirname(RESULTS), { recursive: true });
  writeFileSync(
    RESULTS,
    `${JSON.stringify({ benchmark: "relay-chunks", date: new Date().toISOString(), command: commandLine("bench:relay-chunks"), streams, events, rounds, cpu }, null, 2)}\n`,
  );
  console.log(`results: ${RESULTS}`);
}

runIfEntryPoint(import.meta.url, main);
