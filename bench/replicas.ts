/**
 * Router replicas behind a client that spreads requests over them at random (as an L4 load
 * balancer does), with and without shared state (--state-url, a real redis-server), on the same
 * seeded workloads as bench:routing. Every configuration gets a fresh simulated fleet; each
 * replica is a process of its own.
 *
 *   npm run bench:replicas                        quick preset, 1 / 2 / 4 replicas
 *   npm run bench:replicas -- --full              bench:routing's default preset
 *   npm run bench:replicas -- --workload multi-turn --replicas 1,4
 *   npm run bench:replicas -- --cluster --replicas 1,2    radixgate-cluster: its processes sharing
 *                                                         over the local channel, and --no-share
 *   npm run bench:replicas -- --workload tenants --state-relay claims,decisions,all
 *                                                 shared rows per way replicas decide: claims (no
 *                                                 --state-advertise-url), or a --state-relay mode
 *
 * Prints, per workload, the fleet's prefix-cache hit rate (the workers' own counters) and mean
 * client TTFT for each configuration side by side, plus Redis traffic per 1,000 requests (bytes
 * in and out of redis-server, from INFO stats), then the cost of publishing per request
 * (µs, measured in this process). Writes bench/results/replicas.json.
 */
import { randomBytes } from "node:crypto";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { Redis } from "ioredis";
import { freePort } from "../sim/free-port.js";
import { mulberry32 } from "../sim/prng.js";
import { findRedisServer, type LocalRedis, startLocalRedis } from "../sim/redis-server.js";
import { defaultConfig } from "../src/config.js";
import { ApproximateIndex } from "../src/index/approximate-index.js";
import { createLogger } from "../src/logger.js";
import type { PolicyName } from "../src/scheduling/policy.js";
import { PublishingIndex } from "../src/state/publishing-index.js";
import { RedisTransport } from "../src/state/redis-transport.js";
import { STATE_RELAY_MODES, type StateRelayMode } from "../src/state/settings.js";
import { type BuiltRouter, startBuiltCluster } from "./lib/built-router.js";
import { commandLine, machineSummary, runIfEntryPoint, writeResults } from "./lib/entry.js";
import { childFleetHost, type FleetHost } from "./lib/fleet.js";
import { fmt, summarizeMs } from "./lib/latency.js";
import { type LoadJob, loadAgent, runLoad } from "./lib/load.js";
import { type RouterProcess, startRouterProcess } from "./lib/router-process.js";
import { requestFor, routerConfig } from "./lib/routing-runner.js";
import {
  FULL_PRESET,
  type PreparedWorkload,
  prepareWorkload,
  QUICK_PRESET,
  type RoutingPreset,
  WORKLOADS,
  type WorkloadName,
} from "./lib/routing-workloads.js";
import { printTable } from "./lib/stats.js";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const RESULTS = join(ROOT, "bench", "results", "replicas.json");
const DEFAULT_WORKLOADS = ["shared-prefix", "multi-turn", "cache-pressure"].filter((w) =>
  (WORKLOADS as readonly string[]).includes(w),
) as WorkloadName[];

interface ConfigResult {
  replicas: number;
  shared: boolean;
  /** radixgate-cluster rows: its processes sharing over the local channel (true) or not. */
  cluster?: boolean;
  requests: number;
  errors: number;
  hitRate: number;
  meanTtftMs: number;
  p50TtftMs: number;
  /** Shared rows: `claims` (no --state-advertise-url) or the --state-relay mode. */
  relay?: string;
  /** Bytes into / out of redis-server per 1,000 requests (shared rows only). */
  redisInPer1k?: number;
  redisOutPer1k?: number;
}

/**
 * `radixgate-cluster --processes n` (dist/, as production runs it) on one port: the primary hands
 * the load's connections to its processes in turn, the way an L4 balancer spreads them over
 * replicas; with `share` the processes share decisions over the local channel, without (the
 * --no-share flag) each keeps its own index.
 */
async function runCluster(
  w: PreparedWorkload,
  preset: RoutingPreset,
  host: FleetHost,
  processes: number,
  share: boolean,
  policy: PolicyName,
): Promise<ConfigResult> {
  const fleet = await host.startFleet({
    count: preset.workers,
    worker: { timeScale: preset.timeScale, kvCapacityTokens: preset.kvCapacityTokens },
  });
  const dispatcher = loadAgent(preset.concurrency);
  let router: BuiltRouter | undefined;
  try {
    router = await startBuiltCluster(
      processes,
      [
        "--policy",
        policy,
        "--log-level",
        "warn",
        "--worker-urls",
        ...fleet.workers.map((x) => x.url),
      ],
      share ? [] : ["--no-share"],
    );
    const url = router.url;
    const turnIds = new Map<string, string>();
    for (const spec of w.specs) {
      if (spec.conversation !== undefined)
        turnIds.set(`${spec.conversation}/${spec.turn}`, spec.id);
    }
    const jobs = w.specs.map((spec): LoadJob => {
      const job: LoadJob = { key: spec.id, request: requestFor(spec, url) };
      const previous =
        spec.turn !== undefined ? turnIds.get(`${spec.conversation}/${spec.turn - 1}`) : undefined;
      if (previous !== undefined) job.after = previous;
      return job;
    });
    const run = await runLoad(jobs, { dispatcher, concurrency: preset.concurrency });
    const stats = await fleet.stats();
    const prompt = stats.reduce((s, x) => s + x.promptTokens, 0);
    const cached = stats.reduce((s, x) => s + x.cachedTokens, 0);
    const ok = run.outcomes.filter((x) => x.ok);
    const ttft = summarizeMs(ok.map((x) => x.ttftMs));
    return {
      replicas: processes,
      shared: false,
      cluster: share,
      requests: run.outcomes.length,
      errors: run.outcomes.length - ok.length,
      hitRate: prompt === 0 ? 0 : cached / prompt,
      meanTtftMs: ttft.mean,
      p50TtftMs: ttft.p50,
    };
  } finally {
    await dispatcher.close();
    await router?.stop();
    await fleet.close();
  }
}

async function runConfig(
  w: PreparedWorkload,
  preset: RoutingPreset,
  host: FleetHost,
  replicas: number,
  redis: LocalRedis | undefined,
  policy: PolicyName,
  /** `claims`, or the --state-relay mode each replica runs with its advertised URL. */
  relay = "claims",
): Promise<ConfigResult> {
  const fleet = await host.startFleet({
    count: preset.workers,
    worker: { timeScale: preset.timeScale, kvCapacityTokens: preset.kvCapacityTokens },
  });
  const urls = fleet.workers.map((x) => x.url);
  const prefix = `bench${Date.now().toString(36)}${replicas}`;
  const routers: RouterProcess[] = [];
  const dispatcher = loadAgent(preset.concurrency);
  const admin = redis === undefined ? undefined : new Redis(redis.url);
  try {
    for (let i = 0; i < replicas; i++) {
      // A relaying replica advertises where it listens: its port is chosen before it starts.
      const port = redis !== undefined && relay !== "claims" ? await freePort() : undefined;
      routers.push(
        await startRouterProcess(
          routerConfig(policy, urls, {
            ...(redis !== undefined
              ? { stateUrl: redis.url, stateSecret: BENCH_STATE_SECRET, stateKeyPrefix: prefix }
              : {}),
            ...(port !== undefined
              ? {
                  port,
                  stateAdvertiseUrl: `http://127.0.0.1:${port}`,
                  stateRelay: relay as StateRelayMode,
                }
              : {}),
          }),
        ),
      );
    }
    // The leader's URL reaches the others with its load value (every 50 ms).
    if (redis !== undefined && relay !== "claims") await new Promise((r) => setTimeout(r, 500));
    // The L4 balancer: each request (each turn of a chat too) to a replica drawn at random.
    const rng = mulberry32(preset.seed + replicas);
    const turnIds = new Map<string, string>();
    for (const spec of w.specs) {
      if (spec.conversation !== undefined)
        turnIds.set(`${spec.conversation}/${spec.turn}`, spec.id);
    }
    const jobs = w.specs.map((spec): LoadJob => {
      const router = routers[Math.floor(rng() * routers.length)] as RouterProcess;
      const job: LoadJob = { key: spec.id, request: requestFor(spec, router.url) };
      const previous =
        spec.turn !== undefined ? turnIds.get(`${spec.conversation}/${spec.turn - 1}`) : undefined;
      if (previous !== undefined) job.after = previous;
      return job;
    });
    const before = admin === undefined ? undefined : await redisTraffic(admin);
    const run = await runLoad(jobs, { dispatcher, concurrency: preset.concurrency });
    const after = admin === undefined ? undefined : await redisTraffic(admin);
    const stats = await fleet.stats();
    const prompt = stats.reduce((s, x) => s + x.promptTokens, 0);
    const cached = stats.reduce((s, x) => s + x.cachedTokens, 0);
    const ok = run.outcomes.filter((x) => x.ok);
    const ttft = summarizeMs(ok.map((x) => x.ttftMs));
    const per1k = (bytes: number) => Math.round((bytes * 1000) / run.outcomes.length);
    return {
      replicas,
      shared: redis !== undefined,
      ...(redis !== undefined ? { relay } : {}),
      requests: run.outcomes.length,
      errors: run.outcomes.length - ok.length,
      hitRate: prompt === 0 ? 0 : cached / prompt,
      meanTtftMs: ttft.mean,
      p50TtftMs: ttft.p50,
      ...(before !== undefined && after !== undefined
        ? {
            redisInPer1k: per1k(after.input - before.input),
            redisOutPer1k: per1k(after.output - before.output),
          }
        : {}),
    };
  } finally {
    admin?.disconnect();
    await dispatcher.close();
    await Promise.allSettled(routers.map((r) => r.stop()));
    await fleet.close();
  }
}

/** redis-server's own byte counters (every client, the bench's INFO calls included: tiny). */
async function redisTraffic(redis: Redis): Promise<{ input: number; output: number }> {
  const info = await redis.info("stats");
  const field = (name: string) => Number(new RegExp(`${name}:(\\d+)`).exec(info)?.[1] ?? 0);
  return { input: field("total_net_input_bytes"), output: field("total_net_output_bytes") };
}

/**
 * What publishing adds to a request, in this process: `inserts` routing decisions of `textChars`
 * characters through the index alone, then through the publishing layer with a live Redis, timed
 * until the last one has left (queue push on the request path + batching and sending on the
 * event loop). Returns µs per decision for both and their difference.
 */
async function publishCost(redisUrl: string, inserts: number, textChars: number) {
  const texts = Array.from(
    { length: 64 },
    (_, i) => `${i} ${"lorem ipsum dolor ".repeat(textChars / 18)}`,
  );
  const time = async (fn: (i: number) => void, drain: () => Promise<void>) => {
    const cpu = process.cpuUsage();
    const start = performance.now();
    // The request path's share: the synchronous insert calls alone.
    let syncMs = 0;
    for (let i = 0; i < inserts; i++) {
      const t0 = performance.now();
      fn(i);
      syncMs += performance.now() - t0;
      // Yield now and then, as requests do, so batches leave while inserts go on.
      if (i % 64 === 63) await new Promise((resolve) => setImmediate(resolve));
    }
    await drain();
    const wallUs = ((performance.now() - start) * 1000) / inserts;
    const used = process.cpuUsage(cpu);
    return {
      syncUs: (syncMs * 1000) / inserts,
      wallUs,
      cpuUs: (used.user + used.system) / inserts,
    };
  };
  const plain = new ApproximateIndex({ maxTreeSize: 1 << 24 });
  plain.addWorker("w");
  const alone = await time(
    (i) => plain.insert("w", "m", texts[i % texts.length] as string),
    async () => {},
  );
  const state = new RedisTransport(
    {
      ...stateDefaults(),
      url: redisUrl,
      keyPrefix: `cost${Date.now().toString(36)}`,
      queueSize: inserts,
    },
    createLogger({ level: "silent" }),
  );
  const inner = new ApproximateIndex({ maxTreeSize: 1 << 24 });
  inner.addWorker("w");
  // What the replication puts around the index for this transport.
  const index = new PublishingIndex(inner, (op) => state.publish(op), state.maxTextChars);
  await state.link.connect();
  const shared = await time(
    (i) => index.insert("w", "m", texts[i % texts.length] as string),
    () => state.publisher.flush(),
  );
  await state.stop();
  return {
    alone,
    shared,
    addedSyncUs: shared.syncUs - alone.syncUs,
    addedCpuUs: shared.cpuUs - alone.cpuUs,
  };
}

/** The replicas' shared --state-secret (new for every run). */
const BENCH_STATE_SECRET = randomBytes(24).toString("hex");

function stateDefaults() {
  return { ...defaultConfig().state, url: "", secret: BENCH_STATE_SECRET };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      full: { type: "boolean", default: false },
      workload: { type: "string", default: DEFAULT_WORKLOADS.join(",") },
      replicas: { type: "string", default: "1,2,4" },
      cluster: { type: "boolean", default: false },
      policy: { type: "string", default: "cache_aware" },
      "state-relay": { type: "string", default: "claims" },
      help: { type: "boolean", default: false },
    },
  });
  if (values.help) {
    console.log(
      "usage: npm run bench:replicas -- [--full] [--workload a,b] [--replicas 1,2,4] [--cluster] [--policy p] [--state-relay claims,decisions,...]\n" +
        "  --state-relay: the shared rows, one per way: claims (no --state-advertise-url) or a --state-relay mode\n" +
        "  --cluster: radixgate-cluster rows (processes sharing over the local channel, and --no-share) instead of replicas\n" +
        `  workloads: ${WORKLOADS.join(", ")} (default ${DEFAULT_WORKLOADS.join(", ")})`,
    );
    return;
  }
  const preset = values.full ? FULL_PRESET : QUICK_PRESET;
  const policy = values.policy as PolicyName;
  const workloads = values.workload.split(",").map((w) => {
    if (!(WORKLOADS as readonly string[]).includes(w)) throw new Error(`unknown workload ${w}`);
    return w as WorkloadName;
  });
  const relays = values["state-relay"].split(",").map((mode) => {
    if (mode !== "claims" && !(STATE_RELAY_MODES as readonly string[]).includes(mode))
      throw new Error(`--state-relay: ${mode} is not claims, ${STATE_RELAY_MODES.join(", ")}`);
    return mode;
  });
  const counts = values.replicas.split(",").map((n) => {
    const v = Number(n);
    if (!Number.isInteger(v) || v < 1 || v > 16) throw new Error(`--replicas: bad count ${n}`);
    return v;
  });
  if (findRedisServer() === undefined) {
    console.error("bench:replicas needs redis-server: apt-get install -y redis-server");
    process.exit(2);
  }
  const redis = await startLocalRedis();
  const host = await childFleetHost();
  const report: Record<string, ConfigResult[]> = {};
  try {
    for (const name of workloads) {
      const w = prepareWorkload(name, preset);
      const results: ConfigResult[] = [];
      for (const n of counts) {
        if (values.cluster) {
          for (const share of n === 1 ? [true] : [true, false]) {
            process.stderr.write(
              `${name}: radixgate-cluster --processes ${n}${share ? "" : " --no-share"}...\n`,
            );
            results.push(await runCluster(w, preset, host, n, share, policy));
          }
          continue;
        }
        for (const shared of n === 1 ? [false] : [false, true]) {
          for (const relay of shared ? relays : ["claims"]) {
            process.stderr.write(
              `${name}: ${n} replica(s), ${shared ? `shared state, ${relay}` : "local state"}...\n`,
            );
            results.push(
              await runConfig(w, preset, host, n, shared ? redis : undefined, policy, relay),
            );
          }
        }
      }
      report[name] = results;
      console.log(
        `\n${name} (${w.description}; ${w.specs.length} requests, preset ${preset.name})`,
      );
      printTable(
        [
          "replicas",
          "state",
          "hit rate",
          "mean TTFT ms",
          "p50 TTFT ms",
          "errors",
          "Redis in/out per 1k req",
        ],
        results.map((r) => [
          r.replicas,
          r.cluster === undefined
            ? r.shared
              ? `--state-url${r.relay === undefined || r.relay === "claims" ? "" : `, --state-relay ${r.relay}`}`
              : "local"
            : r.cluster
              ? "cluster, shared locally"
              : "cluster --no-share",
          `${(r.hitRate * 100).toFixed(1)}%`,
          fmt(r.meanTtftMs),
          fmt(r.p50TtftMs),
          r.errors,
          r.redisInPer1k === undefined
            ? "-"
            : `${(r.redisInPer1k / 1e6).toFixed(2)} MB / ${((r.redisOutPer1k ?? 0) / 1e6).toFixed(2)} MB`,
        ]),
      );
    }
    const cost = await publishCost(redis.url, 20_000, preset.sharedPrefix.systemPromptTokens * 4);
    const chars = preset.sharedPrefix.systemPromptTokens * 4;
    console.log(
      `\npublishing cost per routing decision (${chars}-char texts, 20,000 decisions, Redis on this machine):\n` +
        `  on the request path (synchronous insert): index alone ${fmt(cost.alone.syncUs, 2)} µs, ` +
        `with publishing ${fmt(cost.shared.syncUs, 2)} µs (added ${fmt(cost.addedSyncUs, 2)} µs)\n` +
        `  CPU in all (insert + encoding + sending, until every op has left): index alone ` +
        `${fmt(cost.alone.cpuUs, 2)} µs, with publishing ${fmt(cost.shared.cpuUs, 2)} µs ` +
        `(added ${fmt(cost.addedCpuUs, 2)} µs)`,
    );
    writeResults(RESULTS, {
      command: commandLine("bench:replicas"),
      date: new Date().toISOString(),
      machine: machineSummary(),
      preset: preset.name,
      workloads: report,
      publishCost: cost,
    });
  } finally {
    await host.close();
    await redis.stop();
  }
}

runIfEntryPoint(import.meta.url, main);
