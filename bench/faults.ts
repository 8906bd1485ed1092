/**
 * Fault bench: every attack on the router's trust boundaries, each for a while beside steady
 * legitimate traffic, against simulated workers. Per attack, a fresh router (the built CLI,
 * `node dist/cli.js` as production runs it, its own process, default flags plus what the attack
 * needs), measured first quiet, then under the attack, the same way: 4 legitimate clients sending
 * short chat completions back to back, and a /health probe every 10 ms. Three processes besides
 * the router, so that no side's CPU shows up as another's latency: the bench (it generates the
 * attack traffic; floods come from a raw-socket client with precomputed requests,
 * lib/raw-attacker.ts, as an attacker on another host would spend none of these cores), the
 * simulated workers (bench/lib/fleet.ts, a child) and the measuring side
 * (bench/lib/fault-probe.ts, a child).
 * Attack traffic comes from other loopback addresses (127.0.0.2 and up) than the legitimate
 * clients (127.0.0.1), as it would from another client, so per-address bounds apply to it alone.
 *
 * Recorded per attack: legitimate p50/p99 quiet and attacked (and their ratio), the p99 of one
 * more client sending the same requests straight to a worker (what the workers themselves take,
 * apart from what the target adds), the worst /health answer time, the router's peak RSS (VmHWM)
 * quiet and attacked and its open file descriptors, its CPU (% of a core) quiet and attacked, the bench's own CPU while it attacks (the
 * attackers share the machine's cores), legitimate requests refused (429/503) and
 * accepted-and-lost (any other failure after the router took them), and what the attack achieved.
 *
 *   npm run bench:faults                         every attack, 8 s quiet + 20 s attacked each
 *   npm run bench:faults -- --secs 5 --quiet-secs 3        a quick run
 *   npm run bench:faults -- --only pd-n,hostile-yaml
 *   npm run bench:faults -- --only big-bodies,big-bodies-ungated
 *                       the large-body gate's effect: the same attack with and without it
 *   npm run bench:faults -- --only big-bodies --no-references
 *                       big-bodies alone against the router (else also against plain nginx and a
 *                       bare Node.js server draining the bodies, beside the same workers)
 *   npm run bench:faults -- --only big-bodies --node-flags="--cpu-prof --cpu-prof-dir=/tmp/prof"
 *                                   Node flags for the router (profiles, --trace-gc to its stderr)
 *
 * Targets: worst /health <= 100 ms, legitimate p99 <= 2x quiet, RSS within docs/reliability.md's
 * bounds, nothing accepted lost. Prints a table and writes bench/results/faults.json.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { setMaxListeners } from "node:events";
import { mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { createServer, request as httpRequest, type Server } from "node:http";
import { type AddressInfo, connect, type Socket } from "node:net";
import os from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { Redis } from "ioredis";
import { Agent } from "undici";
import { Publisher } from "zeromq";
import { freePort } from "../sim/free-port.js";
import { encodeBatch, type WireEvent } from "../sim/kv-event-encoder.js";
import { startLocalRedis } from "../sim/redis-server.js";
import type { SimWorkerOptions } from "../sim/worker.js";
import { encodeSequence } from "../src/kv-events/decode.js";
import { startBareNodeProxy } from "./lib/bare-node-proxy.js";
import { ensureBuilt } from "./lib/built-router.js";
import {
  commandLine,
  machineSummary,
  refuseOldNode,
  runIfEntryPoint,
  writeResults,
} from "./lib/entry.js";
import { type ProbeProcess, type ProbeResult, startProbeProcess } from "./lib/fault-probe.js";
import { childFleetHost, type Fleet, type FleetHost, type FleetMember } from "./lib/fleet.js";
import { ensureNginx, startNginx } from "./lib/nginx.js";
import { numberFlag } from "./lib/number-flag.js";
import { processCpuMicros, processTree } from "./lib/process-cpu.js";
import { deepJsonRequest, rawFlood, rawPost } from "./lib/raw-attacker.js";
import { printTable } from "./lib/stats.js";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const RESULTS = join(ROOT, "bench", "results", "faults.json");
const STATE_SECRET = "fault bench state secret";
const LEGIT_CLIENTS = 4;
const HEALTH_EVERY_MS = 10;

/** The address attack traffic comes from (the legitimate clients use 127.0.0.1). */
const ATTACKER_ADDRESS = "127.0.0.2";
const ATTACKER = new Agent({ connect: { localAddress: ATTACKER_ADDRESS } });

/** A simulated worker started for an attack, in the workers' process. */
interface ExtraSim {
  url: string;
  close(): Promise<void>;
}

/** What an attack gets: the router it attacks and the fleet behind it. */
interface Env {
  url: string;
  port: number;
  /** The router's workers, as it was started with them. */
  sims: FleetMember[];
  dir: string;
  redisUrl?: string;
  /** Set by an attack's prepare(), read by its run() and note(). */
  scratch: Record<string, unknown>;
  /** Starts one more simulated worker (in the workers' process, not the bench's). */
  startSim(id: string): Promise<ExtraSim>;
  /** Requests the router's workers received on `path`, all together. */
  engineRequests(path: string): Promise<number>;
}

interface Attack {
  name: string;
  /** What issue 34 calls it. */
  what: string;
  /** Flags of the attacked router besides --host/--port/--log-level (default: the sims as --worker-urls). */
  flags?(env: Omit<Env, "url" | "port">): string[] | Promise<string[]>;
  /** Before the attack, once the router listens. */
  prepare?(env: Env): Promise<void>;
  /** The attack: repeats until `stop` aborts. */
  run(env: Env, stop: AbortSignal): Promise<void>;
  /** What the attack achieved, one short phrase. */
  note?(env: Env): Promise<string>;
  needsRedis?: boolean;
  pd?: boolean;
  /**
   * What docs/reliability.md ("What bounds memory") lets this attack add to the router's RSS, in
   * MB over its quiet peak; undefined: no bound of its own (the quiet base applies).
   */
  rssAllowanceMb?: number;
  /**
   * Also run the attack, with the same legitimate traffic, against plain nginx in front of the
   * same workers and against a bare Node.js server that only drains big bodies: what the machine
   * itself allows, beside what the router achieves.
   */
  references?: true | readonly TargetKind[];
  /** Directives in nginx's server block when it is the target (a rule that refuses the attack). */
  nginxDirectives?: string;
}

/**
 * What an attack is run against: the router, or a reference in front of the same workers (nginx
 * as bench:stream starts it, request buffering on; or a bare Node.js server draining big bodies).
 */
type TargetKind = "router" | "nginx" | "node-drain";

interface Row {
  attack: string;
  target: TargetKind;
  what: string;
  quiet: ProbeResult;
  attacked: ProbeResult;
  p99VsQuiet: number;
  quietRssMb: number;
  peakRssMb: number;
  rssBoundMb: number | undefined;
  peakFds: number;
  /** The target's CPU (user + system; the router with its parse processes) in % of one core. */
  routerCpuPct: { quiet: number; attacked: number };
  /** The bench process's own CPU while it attacked (it generates the attack traffic). */
  attackerCpuPct: number;
  /** The simulated workers' and the measuring side's CPU while attacked, in % of one core. */
  workersCpuPct: number;
  probeCpuPct: number;
  routerExited: string;
  note: string;
  /** The targets this row misses (empty: every one met). */
  missed: string[];
}

/** The body budget's default (--max-body-buffer-bytes), what the body attacks may hold. */
const BODY_BUDGET_MB = 1024;
/** What a router's RSS may move by on its own between two phases (GC timing, JIT). */
const RSS_SLACK_MB = 64;

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    if (signal?.aborted === true) return resolve();
    const done = () => {
      clearTimeout(t);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const t = setTimeout(done, ms);
    signal?.addEventListener("abort", done);
  });

/** Runs `body` in `n` loops until `stop` aborts, errors ignored (the attacker does not care). */
async function loops(n: number, stop: AbortSignal, body: (i: number) => Promise<unknown>) {
  const debug = process.env.FAULTS_DEBUG === "1";
  await Promise.all(
    Array.from({ length: n }, async (_, i) => {
      while (!stop.aborted) {
        try {
          await body(i);
        } catch (err) {
          if (debug) console.error(`loop ${i}: ${(err as Error).message}`);
          await sleep(20, stop);
        }
      }
    }),
  );
}

/** A POST from the attacker's address. */
async function post(url: string, body: unknown, signal?: AbortSignal): Promise<Response> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: typeof body === "string" || Buffer.isBuffer(body) ? body : JSON.stringify(body),
    signal: signal ?? AbortSignal.timeout(60_000),
    // undici's own option: Node's fetch takes it, its types do not name it.
    ...({ dispatcher: ATTACKER } as object),
  });
  await res.arrayBuffer().catch(() => {});
  return res;
}

const chat = (content: string, extra: Record<string, unknown> = {}) => ({
  messages: [{ role: "user", content }],
  max_tokens: 4,
  ...extra,
});

/**
 * Runs `body` in `n` loops until `stop` aborts, counting the rounds it says true of, and notes
 * the count as `note` words it.
 */
async function countLoops(
  env: Env,
  n: number,
  stop: AbortSignal,
  body: (i: number) => Promise<boolean>,
  note: (count: number) => string,
): Promise<void> {
  let count = 0;
  await loops(n, stop, async (i) => {
    if (await body(i)) count++;
  });
  env.scratch.note = note(count);
}

/** The router's flags to read its workers (the sims) from a worker file, written here. */
function workerFileFlags(env: Omit<Env, "url" | "port">): string[] {
  const file = join(env.dir, "workers.yaml");
  writeFileSync(file, simsYaml(env.sims));
  return ["--worker-file", file];
}

const simsYaml = (sims: readonly FleetMember[]) => sims.map((s) => `- ${s.url}\n`).join("");

/** The router's flags to share its state through the bench's Redis, signed. */
function sharedStateFlags(env: Omit<Env, "url" | "port">): string[] {
  return [
    "--worker-urls",
    ...env.sims.map((s) => s.url),
    "--state-url",
    env.redisUrl as string,
    "--state-secret",
    STATE_SECRET,
  ];
}

function openSocket(port: number, localAddress = ATTACKER_ADDRESS): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = connect({ port, host: "127.0.0.1", localAddress }, () => resolve(s));
    s.on("error", reject);
  });
}

function unreachableEntries(n: number): string[] {
  // TEST-NET-3 (RFC 5737): routed nowhere, so every connection waits for its timeout.
  return Array.from({ length: n }, (_, i) => `http://203.0.113.${(i % 250) + 1}:${20000 + i}`);
}

function replaceFile(path: string, text: string): void {
  writeFileSync(`${path}.tmp`, text);
  renameSync(`${path}.tmp`, path);
}

/** A 3.9 MB KV batch (just under the 4 MiB default limit): one BlockStored of 1-token blocks. */
function bigKvBatch(): Uint8Array {
  const blocks = 330_000;
  const hashes = Array.from({ length: blocks }, (_, i) => BigInt(2 ** 40 + i));
  const events: WireEvent[] = [
    {
      type: "BlockStored",
      blockHashes: hashes,
      parentHash: null,
      tokenIds: Array.from({ length: blocks }, (_, i) => 1000 + (i % 30_000)),
      blockSize: 1,
      medium: "GPU",
    },
  ];
  return encodeBatch({ ts: 1, events }, "array");
}

/** One POST with a Buffer body from `localAddress`: its status, and its error code when refused. */
function postFrom(localAddress: string, port: number, path: string, body: Buffer): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: "127.0.0.1",
        port,
        path,
        method: "POST",
        localAddress,
        agent: false,
        headers: { "content-type": "application/json", "content-length": body.length },
        timeout: 120_000,
      },
      (res) => {
        const status = res.statusCode ?? 0;
        if (status < 400) {
          res.resume();
          res.on("end", () => resolve(String(status)));
        } else {
          let text = "";
          res.setEncoding("utf8");
          res.on("data", (d: string) => {
            text = (text + d).slice(0, 4096);
          });
          res.on("end", () => {
            const code = /"code"\s*:\s*"(\w+)"/.exec(text)?.[1];
            resolve(code === undefined ? String(status) : `${status} ${code}`);
          });
        }
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.on("timeout", () => req.destroy(new Error("timeout")));
    req.end(body);
  });
}

/**
 * 1,000 pipelined completions on one connection, closed 50 ms later, about once a second; counts
 * what the workers received of them (legitimate traffic is chat, so /v1/completions is theirs
 * alone), and how much of it came more than 100 ms after the close: a closed connection must
 * cancel every request read from it, whether queued, waiting or in flight.
 */
async function pipelinedClose(env: Env, stop: AbortSignal): Promise<void> {
  const path = "/v1/completions";
  const burst = rawPost(path, JSON.stringify({ prompt: "pipelined", max_tokens: 4 })).repeat(1000);
  let bursts = 0;
  let reached = 0;
  let late = 0;
  while (!stop.aborted) {
    const before = await env.engineRequests(path);
    const s = await openSocket(env.port);
    s.on("error", () => {});
    s.write(burst);
    await sleep(50);
    s.destroy();
    await sleep(100);
    const atClose = await env.engineRequests(path);
    await sleep(900);
    const after = await env.engineRequests(path);
    bursts++;
    reached += after - before;
    late += after - atClose;
  }
  env.scratch.note = `${bursts} bursts: ${bursts === 0 ? 0 : Math.round(reached / bursts)} of 1,000 a burst reached the workers, ${late} in all more than 100 ms after the close`;
}

/** 16 clients on 16 addresses, each posting 60 MB bodies back to back. */
async function bigBodies(env: Env, stop: AbortSignal): Promise<void> {
  // A chat request an engine takes (vLLM and SGLang ignore an unknown field): the router reads
  // it whole, parses it and forwards all 60 MB; the engine answers at once.
  const head = `{"messages":[{"role":"user","content":"a big body"}],"max_tokens":4,"padding":"`;
  const size = 60 * 1024 * 1024;
  const body = Buffer.alloc(size, "x");
  body.write(head, 0);
  body.write('"}', size - 2);
  const answers = new Map<string, number>();
  await loops(16, stop, async (i) => {
    const status = await postFrom(`127.0.0.${10 + i}`, env.port, "/v1/chat/completions", body);
    answers.set(status, (answers.get(status) ?? 0) + 1);
    // Noted as they come: a body still under way when the bench moves on is not waited for.
    env.scratch.note = [...answers]
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([code, n]) => `${n}× ${code}`)
      .join(", ");
  });
}

/** "200× 400, 3× closed": what a flood's answers were, most common first. */
function tally(answers: ReadonlyMap<string, number>): string {
  return [...answers]
    .sort(([, a], [, b]) => b - a)
    .map(([k, n]) => `${n}× ${k}`)
    .join(", ");
}

/**
 * `loops` connections from the attacker's address sending `request` back to back (the cheap
 * client of lib/raw-attacker.ts); notes the answers per second and what they were.
 */
async function flood(env: Env, stop: AbortSignal, loops: number, request: Buffer): Promise<void> {
  const started = performance.now();
  const answers = new Map<string, number>();
  await rawFlood(
    {
      port: env.port,
      localAddress: ATTACKER_ADDRESS,
      loops,
      request,
      onAnswer: (status) => answers.set(status, (answers.get(status) ?? 0) + 1),
    },
    stop,
  );
  const secs = (performance.now() - started) / 1000;
  const total = [...answers.values()].reduce((a, b) => a + b, 0);
  env.scratch.note = `${Math.round(total / secs)} answers/s: ${tally(answers)}`;
}

/**
 * 8 clients posting 240 KB nested 120,000 deep, back to back: no pause after an error either, as a
 * connection closed early is just a refusal to an attacker, who reconnects at once.
 */
function deepJsonFlood(env: Env, stop: AbortSignal): Promise<void> {
  return flood(env, stop, 8, deepJsonRequest());
}

const ATTACKS: Attack[] = [
  {
    name: "pd-n",
    what: 'PD: "n": 1000000 in a 69-byte request',
    pd: true,
    run: (env, stop) =>
      loops(1, stop, () => post(`${env.url}/v1/chat/completions`, chat("hi", { n: 1_000_000 }))),
  },
  {
    name: "pd-bootstrap-deep",
    what: "PD body with client bootstrap_* fields and deep nesting",
    pd: true,
    async run(env, stop) {
      const deep = `${"[".repeat(20_000)}${"]".repeat(20_000)}`;
      const body = `{"messages":[{"role":"user","content":"x"}],"max_tokens":1,"bootstrap_host":"h","bootstrap_room":1,"extra":${deep}}`;
      await countLoops(
        env,
        2,
        stop,
        async () => (await post(`${env.url}/v1/chat/completions`, body)).status >= 500,
        (n) => `${n} answers 5xx`,
      );
    },
  },
  {
    name: "slow-uploads",
    what: "16 sockets declaring 64 MiB, sending 500 B/s",
    rssAllowanceMb: BODY_BUDGET_MB,
    async run(env, stop) {
      await loops(16, stop, async () => {
        const s = await openSocket(env.port);
        s.on("error", () => {});
        s.write(
          "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 67108864\r\n\r\n",
        );
        while (!stop.aborted && !s.destroyed) {
          s.write("x".repeat(50));
          await sleep(100, stop);
        }
        s.destroy();
      });
    },
  },
  {
    name: "hostile-yaml",
    what: "worker file rewritten as 200 KB of nested [",
    flags: workerFileFlags,
    async run(env, stop) {
      const file = join(env.dir, "workers.yaml");
      const good = simsYaml(env.sims);
      let i = 0;
      while (!stop.aborted) {
        replaceFile(file, i++ % 2 === 0 ? "[".repeat(100_000) : good);
        await sleep(2000, stop);
      }
      replaceFile(file, good);
    },
  },
  {
    name: "big-worker-file",
    what: "worker file of 9,999 unreachable entries",
    flags: workerFileFlags,
    async run(env, stop) {
      const file = join(env.dir, "workers.yaml");
      const urls = [...env.sims.map((s) => s.url), ...unreachableEntries(9_999 - env.sims.length)];
      replaceFile(file, urls.map((u) => `- ${u}\n`).join(""));
      await sleep(1e9, stop);
    },
  },
  {
    name: "match-probing",
    what: "probing another tenant's prompt through match= in x-radixgate-route",
    async prepare(env) {
      await post(`${env.url}/v1/chat/completions`, chat("the secret PIN is 482913, keep it")).catch(
        () => {},
      );
    },
    run: (env, stop) =>
      countLoops(
        env,
        2,
        stop,
        async (i) => {
          const res = await post(
            `${env.url}/v1/chat/completions`,
            chat(`the secret PIN is ${i}${Math.floor(Math.random() * 10)}`),
          );
          return (res.headers.get("x-radixgate-route") ?? "").includes("match=");
        },
        (n) => `${n} answers carried match=`,
      ),
  },
  {
    name: "get-server-info",
    what: "GET /get_server_info (workers' keys)",
    flags: (env) => [
      "--worker-urls",
      ...env.sims.map((s) => s.url),
      "--worker-api-key",
      "sk-bench-worker-key",
    ],
    run: (env, stop) =>
      countLoops(
        env,
        2,
        stop,
        async () => {
          const res = await fetch(`${env.url}/get_server_info`, {
            signal: AbortSignal.timeout(30_000),
          });
          return (await res.text()).includes("sk-bench-worker-key");
        },
        (n) => `${n} answers held the worker key`,
      ),
  },
  {
    name: "redis-replay",
    what: "signed add-worker op replayed with XADD after the removal",
    needsRedis: true,
    flags: sharedStateFlags,
    async run(env, stop) {
      const redis = new Redis(env.redisUrl as string, {
        lazyConnect: false,
        maxRetriesPerRequest: 1,
      });
      try {
        const victim = await env.startSim("victim");
        env.scratch.victim = victim;
        const added = await post(`${env.url}/workers`, { url: victim.url });
        const id = ((await added.json().catch(() => ({}))) as { id?: string }).id;
        await sleep(1000, stop);
        const streams = (await redis.keys("*ops*"))
          .filter((k) => !k.includes(":"))
          .concat(await redis.keys("*:ops*"));
        const stream = streams[0];
        const entries = stream === undefined ? [] : await redis.xrange(stream, "-", "+");
        await fetch(`${env.url}/workers/${encodeURIComponent(id ?? victim.url)}`, {
          method: "DELETE",
        }).catch(() => {});
        env.scratch.entries = entries.length;
        while (!stop.aborted && stream !== undefined) {
          for (const [, fields] of entries) await redis.xadd(stream, "*", ...fields);
          await sleep(200, stop);
        }
      } finally {
        redis.disconnect();
      }
    },
    async note(env) {
      const victim = env.scratch.victim as ExtraSim | undefined;
      if (victim === undefined) return "no victim";
      const workers = (
        (await (await fetch(`${env.url}/workers`)).json()) as {
          workers: { url: string }[];
        }
      ).workers;
      await victim.close();
      return `${env.scratch.entries} ops replayed; removed worker ${workers.some((w) => w.url === victim.url) ? "BACK" : "stays out"}`;
    },
  },
  {
    name: "redis-max-id",
    what: "ops entry at the maximum stream ID",
    needsRedis: true,
    flags: sharedStateFlags,
    async run(env, stop) {
      const redis = new Redis(env.redisUrl as string, { maxRetriesPerRequest: 1 });
      try {
        const streams = await redis.keys("*ops*");
        const stream = streams.find((k) => !k.endsWith("workers")) ?? "radixgate:ops";
        const maxId = "18446744073709551615-18446744073709551615";
        await redis.xadd(stream, maxId, "junk", "1").catch(() => {});
        const extra = await env.startSim("late");
        await post(`${env.url}/workers`, { url: extra.url });
        await sleep(1500, stop);
        // The router starts a stuck stream over (it deletes it): new entries, below the max ID.
        const top = (await redis.xrevrange(stream, "+", "-", "COUNT", 1).catch(() => []))[0]?.[0];
        env.scratch.note =
          top !== undefined && top !== maxId ? "publishing goes on" : "publishing STOPPED";
        await sleep(1e9, stop);
        await extra.close();
      } finally {
        redis.disconnect();
      }
    },
  },
  {
    name: "pipelined-close",
    what: "1,000 pipelined POSTs on one connection, closed after 50 ms",
    run: pipelinedClose,
  },
  {
    name: "pipelined-queued",
    what: "the same with --max-concurrent-requests 1 (they would queue ahead of everyone)",
    flags: (env) => [
      "--worker-urls",
      ...env.sims.map((s) => s.url),
      "--max-concurrent-requests",
      "1",
    ],
    run: pipelinedClose,
  },
  {
    name: "lora-path",
    what: "requests with distinct 5 MB lora_path values",
    run: (env, stop) =>
      countLoops(
        env,
        1,
        stop,
        async (i) => {
          const res = await post(`${env.url}/generate`, {
            text: "hello",
            lora_path: `${i}-${Date.now()}-${"a".repeat(5 * 1024 * 1024)}`,
            sampling_params: { max_new_tokens: 1 },
          });
          return res.status < 300;
        },
        (n) => `${n} names accepted`,
      ),
  },
  {
    name: "deep-json",
    what: "8 clients posting deeply nested JSON just under 256 KiB",
    // The machine's reference: nginx refusing bodies over 200 KB (413, then its lingering close).
    references: ["nginx"],
    nginxDirectives: "client_max_body_size 200k;",
    run: (env, stop) => deepJsonFlood(env, stop),
  },
  {
    name: "big-kv-batch",
    what: "3.9 MB KV-event batches (under the 4 MiB limit)",
    async flags(env) {
      const pub = new Publisher({ linger: 0 });
      await pub.bind("tcp://127.0.0.1:*");
      env.scratch.pub = pub;
      return ["--kv-events"];
    },
    async prepare(env) {
      const pub = env.scratch.pub as Publisher;
      await post(`${env.url}/workers`, {
        url: (await env.startSim("kv")).url,
        kv_events_endpoint: pub.lastEndpoint,
      });
    },
    async run(env, stop) {
      const pub = env.scratch.pub as Publisher;
      const batch = bigKvBatch();
      env.scratch.note = `batches of ${(batch.length / 1e6).toFixed(1)} MB`;
      let seq = 0n;
      while (!stop.aborted) {
        await pub.send(["", encodeSequence(seq++), batch]);
        await sleep(500, stop);
      }
      pub.close();
    },
  },
  {
    name: "big-bodies",
    what: "16 concurrent 60 MB bodies, from 16 addresses",
    rssAllowanceMb: BODY_BUDGET_MB,
    references: true,
    run: bigBodies,
  },
  {
    name: "big-bodies-ungated",
    what: "the same with --max-large-body-reads 0 (every body read at once, as before the gate)",
    rssAllowanceMb: BODY_BUDGET_MB,
    flags: (env) => ["--worker-urls", ...env.sims.map((s) => s.url), "--max-large-body-reads", "0"],
    run: bigBodies,
  },
  {
    name: "idle-pool",
    what: "many short streams: idle upstream connections",
    // 64 clients back to back against 4: what any proxy in front of the same workers keeps.
    references: ["nginx"],
    run: (env, stop) =>
      flood(
        env,
        stop,
        64,
        Buffer.from(
          rawPost(
            "/v1/chat/completions",
            JSON.stringify(chat("stream me", { stream: true, max_tokens: 2 })),
          ),
        ),
      ),
  },
  {
    name: "k8s-watch-line",
    what: "Kubernetes watch line of 300 MB with no newline",
    async flags(env) {
      const server = await fakeKubeApi();
      env.scratch.kube = server;
      const kubeconfig = join(env.dir, "kubeconfig");
      writeFileSync(
        kubeconfig,
        [
          "apiVersion: v1",
          "kind: Config",
          "clusters:",
          "- name: bench",
          "  cluster:",
          `    server: http://127.0.0.1:${(server.address() as AddressInfo).port}`,
          "    insecure-skip-tls-verify: true",
          "users:",
          "- name: bench",
          "  user:",
          "    token: t",
          "contexts:",
          "- name: bench",
          "  context: {cluster: bench, user: bench, namespace: llm}",
          "current-context: bench",
          "",
        ].join("\n"),
      );
      return [
        "--worker-urls",
        ...env.sims.map((s) => s.url),
        "--service-discovery",
        "--selector",
        "app=sim",
        "--service-discovery-namespace",
        "llm",
        "--kubeconfig",
        kubeconfig,
      ];
    },
    async run(env, stop) {
      await sleep(1e9, stop);
      (env.scratch.kube as Server).closeAllConnections();
      (env.scratch.kube as Server).close();
    },
    async note(env) {
      return `${(((env.scratch.kube as Server & { sent?: number }).sent ?? 0) / 1e6).toFixed(0)} MB of one line sent`;
    },
  },
  {
    name: "own-address",
    what: "the router's own address as a worker (http://0:<port> and other spellings)",
    async run(env, stop) {
      const spellings = [
        `http://0:${env.port}`,
        `http://0.0.0.0:${env.port}`,
        `http://[::]:${env.port}`,
        `http://localhost:${env.port}`,
        `http://127.0.0.1:${env.port}`,
        `http://127.1:${env.port}`,
        `http://[::ffff:127.0.0.1]:${env.port}`,
      ];
      const accepted = new Set<string>();
      await loops(1, stop, async () => {
        for (const url of spellings) {
          const res = await post(`${env.url}/workers`, { url });
          if (res.status < 300) accepted.add(url);
        }
        await sleep(200, stop);
      });
      env.scratch.note = `${accepted.size} of ${spellings.length} spellings accepted${accepted.size > 0 ? `: ${[...accepted].join(" ")}` : ""}`;
    },
  },
];

/** A Kubernetes API whose pod list is empty and whose watch sends one endless line. */
async function fakeKubeApi(): Promise<Server & { sent?: number }> {
  const chunk = Buffer.alloc(64 * 1024, "x");
  const server: Server & { sent?: number } = createServer((req, res) => {
    if (!(req.url ?? "").includes("watch=")) {
      res.setHeader("content-type", "application/json");
      res.end(
        JSON.stringify({
          kind: "PodList",
          apiVersion: "v1",
          metadata: { resourceVersion: "10" },
          items: [],
        }),
      );
      return;
    }
    res.writeHead(200, { "content-type": "application/json" });
    res.write('{"type":"ADDED","object":{"kind":"Pod","metadata":{"name":"');
    let sent = 0;
    const pump = () => {
      while (sent < 300e6) {
        sent += chunk.length;
        server.sent = (server.sent ?? 0) + chunk.length;
        if (!res.write(chunk)) return void res.once("drain", pump);
      }
    };
    res.on("error", () => {});
    pump();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return server;
}

interface RouterChild {
  child: ChildProcess;
  url: string;
  port: number;
  exited: () => string;
}

/** What an attack runs against, whichever it is. */
interface Target {
  url: string;
  port: number;
  /** The process whose RSS and fds are read. */
  pid: number;
  /** The processes whose CPU is the target's (the router and its parse processes). */
  cpuPids(): number[];
  exited(): string;
  stop(gracefully: boolean): Promise<void>;
}

async function startTarget(
  kind: TargetKind,
  flags: string[],
  sims: readonly FleetMember[],
  nodeFlags: string[],
  nginxDirectives = "",
): Promise<Target> {
  if (kind === "router") {
    const router = await startRouterCli(flags, nodeFlags);
    const pid = router.child.pid as number;
    return {
      url: router.url,
      port: router.port,
      pid,
      cpuPids: () => processTree(pid),
      exited: router.exited,
      stop: (gracefully) => stopRouter(router, gracefully),
    };
  }
  const urls = sims.map((s) => s.url);
  if (kind === "nginx") {
    const nginx =
      ensureNginx("bench:faults") === undefined
        ? undefined
        : await startNginx(urls, [], nginxDirectives);
    if (nginx === undefined) throw new Error("nginx is not installed");
    const pid = nginx.workerPid() ?? 0;
    return {
      url: nginx.url,
      port: Number(new URL(nginx.url).port),
      pid,
      cpuPids: () => [pid],
      exited: () => "",
      stop: () => nginx.stop(),
    };
  }
  // Bodies over 1 MiB are read and dropped there: nothing kept, parsed or sent on.
  const bare = await startBareNodeProxy(urls, 1024 * 1024);
  return {
    url: bare.url,
    port: Number(new URL(bare.url).port),
    pid: bare.pid,
    cpuPids: () => [bare.pid],
    exited: () => "",
    stop: () => bare.stop(),
  };
}

/**
 * The router as production runs it: `node dist/cli.js`, built first when stale. Under tsx's loader
 * every Error's stack went through source maps, which a flood of refusals (each one an Error) and
 * thousands of failing probes paid for in CPU that no deployment spends.
 */
async function startRouterCli(flags: string[], nodeFlags: string[]): Promise<RouterChild> {
  ensureBuilt();
  const port = await freePort();
  const child = spawn(
    process.execPath,
    [
      ...nodeFlags,
      join(ROOT, "dist", "cli.js"),
      "--host",
      "127.0.0.1",
      "--port",
      String(port),
      "--log-level",
      "warn",
      ...flags,
    ],
    // With Node flags of its own (--trace-gc prints to stdout), the router's stdout is the bench's.
    { cwd: ROOT, stdio: ["ignore", nodeFlags.length > 0 ? "inherit" : "ignore", "pipe"] },
  );
  let exit = "";
  child.on("exit", (code, signal) => {
    exit = `exit ${code ?? signal}`;
  });
  let out = "";
  child.stderr?.on("data", (d: Buffer) => {
    out = (out + d.toString()).slice(-4000);
  });
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (exit !== "") throw new Error(`router ${exit} at start: ${out}`);
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`router did not listen: ${out}`);
    }
    const up = await fetch(`${url}/health`, { signal: AbortSignal.timeout(2000) }).then(
      () => true,
      () => false,
    );
    if (up) break;
    await sleep(200);
  }
  // Ready: a worker has passed its first health check (the worker file is read after listening).
  while (Date.now() < deadline && exit === "") {
    const res = await fetch(`${url}/workers`).catch(() => undefined);
    const body =
      res === undefined
        ? {}
        : ((await res.json().catch(() => ({}))) as { workers?: { healthy: boolean }[] });
    if ((body.workers ?? []).some((w) => w.healthy)) break;
    await sleep(200);
  }
  return { child, url, port, exited: () => (exit === "" ? "" : `${exit}: ${lastLine(out)}`) };
}

/**
 * Ends the router: at once, or (profiling) by SIGTERM, so that Node writes its --cpu-prof or
 * --heap-prof file, with a SIGKILL if it has not ended within a minute.
 */
async function stopRouter(router: RouterChild, gracefully: boolean): Promise<void> {
  const { child } = router;
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  if (!gracefully) {
    child.kill("SIGKILL");
    return exited;
  }
  child.kill("SIGTERM");
  const killer = setTimeout(() => child.kill("SIGKILL"), 60_000);
  await exited;
  clearTimeout(killer);
}

/** The last non-empty line of a process's output, shortened (why a router exited). */
function lastLine(text: string): string {
  const lines = text.split("\n").filter((l) => l.trim() !== "");
  // A crash ends with Node's version line: the error's own line says more.
  const error = lines.findLast((l) => /Error\b/.test(l));
  return (error ?? lines.at(-1) ?? "").slice(0, 300);
}

function procStatus(pid: number, field: string): number {
  try {
    const m = new RegExp(`^${field}:\\s+(\\d+)`, "m").exec(
      readFileSync(`/proc/${pid}/status`, "utf8"),
    );
    return m === null ? 0 : Number(m[1]);
  } catch {
    return 0;
  }
}

/** CPU time so far (user + system) of several processes together, in ms (those gone count 0). */
const cpuMsOf = (pids: readonly number[]) =>
  pids.reduce((sum, pid) => sum + (processCpuMicros(pid) ?? 0), 0) / 1000;

/** CPU ms spent over `ms` of wall time, as % of one core. */
const cpuPct = (cpuMs: number, ms: number) => (ms > 0 ? Math.round((cpuMs * 100) / ms) : 0);

function openFds(pid: number): number {
  try {
    return readdirSync(`/proc/${pid}/fd`).length;
  } catch {
    return 0;
  }
}

/** The router's workers for an attack: a prefill/decode pair, or two plain workers. */
async function startFleetFor(host: FleetHost, attack: Attack): Promise<Fleet[]> {
  const worker = (role?: SimWorkerOptions["role"]): SimWorkerOptions => ({
    timeScale: 0.05,
    // The engines set no body limit of their own (FastAPI reads any size): big-bodies' 60 MB
    // bodies reach them whole.
    bodyLimitBytes: 128 * 1024 * 1024,
    ...(role === undefined ? {} : { role }),
  });
  if (attack.pd === true) {
    return [
      await host.startFleet({ count: 1, idPrefix: "p", worker: worker("prefill") }),
      await host.startFleet({ count: 1, idPrefix: "d", worker: worker("decode") }),
    ];
  }
  return [await host.startFleet({ count: 2, worker: worker() })];
}

interface Phases {
  quietSecs: number;
  secs: number;
  /** --node-flags: Node's own flags for the router (a CPU profile, --trace-gc). */
  nodeFlags: string[];
}

async function runAttack(
  attack: Attack,
  target: TargetKind,
  phases: Phases,
  host: FleetHost,
  probe: ProbeProcess,
  redisUrl: string | undefined,
): Promise<Row> {
  const dir = mkdtempSync(join(os.tmpdir(), "radixgate-faults-"));
  const fleets = await startFleetFor(host, attack);
  const sims = fleets.flatMap((f) => [...f.workers]);
  const extras: Fleet[] = [];
  const partial = {
    sims,
    dir,
    redisUrl,
    scratch: {} as Record<string, unknown>,
    async startSim(id: string): Promise<ExtraSim> {
      const fleet = await host.startFleet({ count: 1, idPrefix: id, worker: { timeScale: 0.05 } });
      extras.push(fleet);
      return { url: fleet.workers[0]!.url, close: () => fleet.close() };
    },
    async engineRequests(path: string): Promise<number> {
      const all = (await Promise.all(fleets.map((f) => f.stats().catch(() => [])))).flat();
      return all.reduce((n, s) => n + (s.endpoints[path] ?? 0), 0);
    },
  };
  let flags: string[];
  if (attack.pd === true) {
    const [p, d] = sims as [FleetMember, FleetMember];
    flags = [
      "--pd-disaggregation",
      "--prefill",
      p.url,
      String(p.bootstrapPort ?? "none"),
      "--decode",
      d.url,
    ];
  } else {
    flags = attack.flags
      ? await attack.flags(partial)
      : ["--worker-urls", ...sims.map((s) => s.url)];
  }
  const router = await startTarget(target, flags, sims, phases.nodeFlags, attack.nginxDirectives);
  const env: Env = { ...partial, url: router.url, port: router.port };
  const pid = router.pid;
  const config = {
    url: env.url,
    clients: LEGIT_CLIENTS,
    healthEveryMs: HEALTH_EVERY_MS,
    // The workers' own latency beside the target's (a PD pair takes no plain request).
    ...(attack.pd === true || sims[0] === undefined ? {} : { workerUrl: sims[0].url }),
  };
  try {
    await attack.prepare?.(env);
    // Warm-up (first requests compile and connect): not measured.
    await Promise.all(
      Array.from({ length: LEGIT_CLIENTS }, () =>
        post(`${env.url}/v1/chat/completions`, chat("warm up")).catch(() => {}),
      ),
    );
    probe.start(config);
    const quietCpu0 = cpuMsOf(router.cpuPids());
    await sleep(phases.quietSecs * 1000);
    const quietCpuPct = cpuPct(cpuMsOf(router.cpuPids()) - quietCpu0, phases.quietSecs * 1000);
    const quiet = await probe.stop();
    const quietRssMb = Math.round(procStatus(pid, "VmHWM") / 1024);

    const stop = new AbortController();
    // Every loop of every attack waits on it at once (16 slow uploads, 64 streams).
    setMaxListeners(256, stop.signal);
    let peakFds = 0;
    const sampler = setInterval(() => {
      peakFds = Math.max(peakFds, openFds(pid));
    }, 250);
    probe.start(config);
    const attackCpu0 = cpuMsOf(router.cpuPids());
    const otherPids = [host.pid ?? 0, probe.pid ?? 0];
    const othersCpu0 = otherPids.map((p) => cpuMsOf([p]));
    const benchCpu0 = process.cpuUsage();
    const attacking = attack.run(env, stop.signal).catch((err: unknown) => {
      env.scratch.note = `attack failed: ${(err as Error).message}`;
    });
    await sleep(phases.secs * 1000);
    const peakRssMb = Math.round(procStatus(pid, "VmHWM") / 1024);
    const attackedCpuPct = cpuPct(cpuMsOf(router.cpuPids()) - attackCpu0, phases.secs * 1000);
    const benchCpu = process.cpuUsage(benchCpu0);
    const attackerCpuPct = cpuPct((benchCpu.user + benchCpu.system) / 1000, phases.secs * 1000);
    const [workersCpuPct, probeCpuPct] = otherPids.map((p, i) =>
      cpuPct(cpuMsOf([p]) - (othersCpu0[i] as number), phases.secs * 1000),
    ) as [number, number];
    stop.abort();
    clearInterval(sampler);
    const [attacked] = await Promise.all([probe.stop(), Promise.race([attacking, sleep(30_000)])]);
    const p99VsQuiet = quiet.p99Ms > 0 ? round(attacked.p99Ms / quiet.p99Ms, 2) : Number.NaN;
    const rssBoundMb =
      attack.rssAllowanceMb === undefined || target !== "router"
        ? undefined
        : quietRssMb + attack.rssAllowanceMb + RSS_SLACK_MB;
    const missed: string[] = [];
    if (attacked.worstHealthMs > 100 || attacked.healthFailures > 0) missed.push("health");
    if (!(p99VsQuiet <= 2)) missed.push("p99");
    if (attacked.lost > 0) missed.push("lost");
    if (rssBoundMb !== undefined && peakRssMb > rssBoundMb) missed.push("rss");
    const routerExited = router.exited();
    if (routerExited !== "") missed.push("exited");
    const note = attack.note
      ? await attack.note(env).catch((e: unknown) => `note failed: ${(e as Error).message}`)
      : String(env.scratch.note ?? "");
    return {
      attack: attack.name,
      target,
      what: attack.what,
      quiet,
      attacked,
      p99VsQuiet,
      quietRssMb,
      peakRssMb,
      rssBoundMb,
      peakFds,
      routerCpuPct: { quiet: quietCpuPct, attacked: attackedCpuPct },
      attackerCpuPct,
      workersCpuPct,
      probeCpuPct,
      routerExited,
      note,
      missed,
    };
  } finally {
    await router.stop(phases.nodeFlags.length > 0);
    await Promise.all([...fleets, ...extras].map((f) => f.close().catch(() => {})));
    rmSync(dir, { recursive: true, force: true });
  }
}

const round = (v: number, digits = 1) => Math.round(v * 10 ** digits) / 10 ** digits;

const loadAverage = () =>
  os
    .loadavg()
    .map((l) => l.toFixed(1))
    .join(" ");

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      secs: { type: "string" },
      "quiet-secs": { type: "string" },
      only: { type: "string" },
      "node-flags": { type: "string" },
      "no-references": { type: "boolean" },
    },
  });
  const phases: Phases = {
    secs: numberFlag("secs", values.secs, 1, false) ?? 20,
    quietSecs: numberFlag("quiet-secs", values["quiet-secs"], 1, false) ?? 8,
    nodeFlags: values["node-flags"]?.split(" ").filter((s) => s !== "") ?? [],
  };
  const only = values.only?.split(",").filter((s) => s !== "");
  const unknown = only?.filter((n) => !ATTACKS.some((a) => a.name === n)) ?? [];
  if (unknown.length > 0) {
    throw new Error(
      `--only: unknown attacks ${unknown.join(",")}; expected some of ${ATTACKS.map((a) => a.name).join(",")}`,
    );
  }
  const chosen = ATTACKS.filter((a) => only === undefined || only.includes(a.name));
  const redis = chosen.some((a) => a.needsRedis)
    ? await startLocalRedis().catch(() => undefined)
    : undefined;
  const started = new Date().toISOString();
  const load = loadAverage();
  const rows: Row[] = [];
  const host = await childFleetHost();
  const probe = startProbeProcess();
  try {
    for (const attack of chosen) {
      if (attack.needsRedis === true && redis === undefined) {
        console.error(`${attack.name}: skipped (no redis-server)`);
        continue;
      }
      process.stderr.write(
        `${attack.name} (${phases.quietSecs} s quiet, ${phases.secs} s attacked)... `,
      );
      const targets: TargetKind[] =
        attack.references === undefined || values["no-references"] === true
          ? ["router"]
          : [
              "router",
              ...(attack.references === true
                ? (["nginx", "node-drain"] as const)
                : attack.references),
            ];
      for (const target of targets) {
        if (target !== "router") process.stderr.write(`  against ${target}... `);
        const row = await runAttack(attack, target, phases, host, probe, redis?.url);
        rows.push(row);
        process.stderr.write(
          `worst /health ${row.attacked.worstHealthMs} ms, p99 ${row.attacked.p99Ms} ms (quiet ${row.quiet.p99Ms}), load ${loadAverage()}\n`,
        );
      }
    }
  } finally {
    await probe.close();
    await host.close();
    await redis?.stop();
  }
  printTable(
    [
      "attack",
      "against",
      "legit ok",
      "refused",
      "lost",
      "p50 ms quiet/attacked",
      "p99 ms quiet/attacked",
      "p99/quiet",
      "worker p99 ms quiet/attacked",
      "worst /health ms quiet/attacked",
      "RSS MB quiet/peak (bound)",
      "peak fds",
      "target CPU % quiet/attacked",
      "attacker CPU %",
      "workers/probe CPU %",
      "router",
      "targets missed",
      "what the attack got",
    ],
    rows.map((r) => [
      r.attack,
      r.target,
      r.attacked.ok,
      r.attacked.refused,
      r.attacked.lost,
      `${r.quiet.p50Ms}/${r.attacked.p50Ms}`,
      `${r.quiet.p99Ms}/${r.attacked.p99Ms}`,
      r.p99VsQuiet,
      `${r.quiet.workerP99Ms}/${r.attacked.workerP99Ms}`,
      `${r.quiet.worstHealthMs}/${r.attacked.worstHealthMs}${r.attacked.healthFailures > 0 ? ` (${r.attacked.healthFailures} failed)` : ""}`,
      `${r.quietRssMb}/${r.peakRssMb}${r.rssBoundMb === undefined ? "" : ` (${r.rssBoundMb})`}`,
      r.peakFds,
      `${r.routerCpuPct.quiet}/${r.routerCpuPct.attacked}`,
      r.attackerCpuPct,
      `${r.workersCpuPct}/${r.probeCpuPct}`,
      r.routerExited === "" ? "up" : r.routerExited,
      r.missed.length === 0 ? "-" : r.missed.join(","),
      r.note,
    ]),
  );
  const finished = new Date().toISOString();
  writeResults(RESULTS, {
    command: commandLine("bench:faults"),
    started,
    finished,
    loadAverageAtStart: load,
    loadAverageAtEnd: loadAverage(),
    machine: machineSummary(),
    secsPerAttack: phases.secs,
    quietSecsPerAttack: phases.quietSecs,
    rows,
  });
  console.log(
    `\n${commandLine("bench:faults")}; ${started}; load average at start ${load}, at end ${loadAverage()}; ${machineSummary()}`,
  );
}

// An attack's leftovers (a slow upload's socket, a ZMQ publisher) must not keep the run alive.
runIfEntryPoint(import.meta.url, () => {
  refuseOldNode("bench:faults");
  return main().then(() => process.exit(0));
});
