/**
 * Warm start: what a restart or a new replica costs in hit rate, with and without the index
 * snapshot, and what a snapshot costs to write and load.
 *
 *   npm run bench:warm-start                 every part, a scaled-down window (see below)
 *   npm run bench:warm-start -- --part size  one part: size | file | replicas | ramp
 *
 * - size: snapshot bytes, write and load time, and the longest event-loop stall while loading
 *   (a 1 ms timer's worst lateness, which is what /health would wait) for 16 and 256 workers at
 *   full trees of --chars characters each (default 131072: scaled down from an engine's KV).
 * - file: one router (no Redis) on simulated workers; after a warm-up it is restarted (workers and
 *   their KV caches stay up) cold, or with --state-file; the hit rate of the next window of
 *   requests (the engines' cached tokens over prompt tokens) against the same window without a
 *   restart.
 * - replicas: two replicas (--state-url, a real redis-server; requests spread at random) with an
 *   ops stream kept to 50 entries; after more decisions than that, one replica is replaced by a
 *   new one, with the snapshot or without; then a third replica is added: its own hit rate over
 *   the window against its peers'.
 * - ramp: the saturation signal sampled while the simulator's load ramps up and down.
 *
 * The window is counted in requests (--window, default 300), not in the 60 s: the
 * simulator runs without model time, so a minute of traffic is a number of requests.
 * Writes bench/results/warm-start.json.
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { mulberry32 } from "../sim/prng.js";
import { startLocalRedis } from "../sim/redis-server.js";
import { type SimWorker, startSimWorker } from "../sim/worker.js";
import { configWith } from "../src/config.js";
import { ApproximateIndex } from "../src/index/approximate-index.js";
import type { PrefixIndex } from "../src/index/prefix-index.js";
import { SharedIndex } from "../src/index/shared-index.js";
import { createLogger } from "../src/logger.js";
import { type RunningRouter, startRouter } from "../src/server.js";
import { applySnapshot, readSnapshot, writeSnapshot } from "../src/state/snapshot.js";
import { StateSecret } from "../src/state/state-secret.js";
import { commandLine, machineSummary, runIfEntryPoint, writeResults } from "./lib/entry.js";
import { printTable } from "./lib/stats.js";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const RESULTS = join(ROOT, "bench", "results", "warm-start.json");
const SECRET = randomBytes(24).toString("hex");
const silent = createLogger({ level: "silent" });

async function sizePart(charsPerWorker: number) {
  const rows: Record<string, unknown>[] = [];
  for (const indexName of ["shared", "approx"] as const) {
    for (const workers of [16, 256]) {
      const make = (): PrefixIndex =>
        indexName === "shared"
          ? new SharedIndex({ maxTreeSize: charsPerWorker })
          : new ApproximateIndex({ maxTreeSize: charsPerWorker });
      const index = make();
      const ids = Array.from({ length: workers }, (_, i) => `w${i}`);
      const random = mulberry32(7);
      const systems = Array.from({ length: 64 }, (_, i) => `system ${i} `.repeat(200));
      for (const id of ids) {
        index.addWorker(id);
        // Fill to the budget: shared system prompts with distinct user turns.
        for (let n = 0; index.size(id) < charsPerWorker * 0.98 && n < 100_000; n++) {
          const system = systems[Math.floor(random() * systems.length)]!;
          index.insert(
            id,
            undefined,
            `${system}user ${n} ${"q".repeat(200 + Math.floor(random() * 800))}`,
          );
        }
      }
      const held = ids.reduce((n, id) => n + index.size(id), 0);
      const secret = new StateSecret(SECRET);
      const options = { secret, scope: "bench:snapshot", writer: "bench", stream: "" };
      let t = performance.now();
      const data = await writeSnapshot(index, ids, { ...options, maxBytes: 512 * 1024 * 1024 });
      const writeMs = performance.now() - t;
      const target = make();
      for (const id of ids) target.addWorker(id);
      const lag = monitorEventLoopDelay({ resolution: 1 });
      let worstLate = 0;
      // CPU this process spent between two turns of a 1 ms timer: the stall the load itself
      // causes, apart from the time other processes on a loaded machine take the core.
      let worstCpuMs = 0;
      let expected = performance.now() + 1;
      let cpu = process.cpuUsage();
      const probe = setInterval(() => {
        const now = performance.now();
        worstLate = Math.max(worstLate, now - expected);
        expected = now + 1;
        const spent = process.cpuUsage(cpu);
        cpu = process.cpuUsage();
        worstCpuMs = Math.max(worstCpuMs, (spent.user + spent.system) / 1000);
      }, 1);
      lag.enable();
      t = performance.now();
      const { body } = await readSnapshot(data, {
        secret,
        scope: "bench:snapshot",
        maxAgeMs: 60_000,
        maxBytes: 512 * 1024 * 1024,
      });
      const applied = await applySnapshot(
        body,
        { known: () => true, insert: (id, m, text) => target.insert(id, m, text) },
        8 * 1024 * 1024,
      );
      const loadMs = performance.now() - t;
      clearInterval(probe);
      lag.disable();
      const loaded = ids.reduce((n, id) => n + target.size(id), 0);
      rows.push({
        index: indexName,
        workers,
        chars_per_worker: charsPerWorker,
        held_chars: held,
        snapshot_bytes: data.length,
        bytes_per_held_char: +(data.length / held).toFixed(3),
        write_ms: Math.round(writeMs),
        load_ms: Math.round(loadMs),
        loaded_share: +(loaded / held).toFixed(4),
        paths: applied.paths,
        longest_slice_ms: applied.longestSliceMs,
        worst_timer_lateness_ms: Math.round(worstLate),
        worst_cpu_between_turns_ms: Math.round(worstCpuMs),
        loop_delay_max_ms: Math.round(lag.max / 1e6),
      });
    }
  }
  console.log(`\n${"Snapshot size and load time (full trees)"}`);
  printTable(
    [
      "index",
      "workers",
      "held_chars",
      "snapshot_bytes",
      "bytes_per_held_char",
      "write_ms",
      "load_ms",
      "loaded_share",
      "worst_timer_lateness_ms",
      "worst_cpu_between_turns_ms",
    ],
    rows.map((r) =>
      [
        r.index,
        r.workers,
        r.held_chars,
        r.snapshot_bytes,
        r.bytes_per_held_char,
        r.write_ms,
        r.load_ms,
        r.loaded_share,
        r.worst_timer_lateness_ms,
        r.worst_cpu_between_turns_ms,
      ].map(String),
    ),
  );
  return rows;
}

/** A workload: many conversations under a few system prompts, each request a new turn. */
function workload(seed: number, topics: number) {
  const random = mulberry32(seed);
  const systems = Array.from(
    { length: topics },
    (_, i) =>
      `You are assistant number ${i}. ${"Follow the house rules and cite the manual. ".repeat(40)}`,
  );
  let n = 0;
  return () => {
    // Skewed: a few topics take most requests.
    const topic = Math.floor(topics * random() ** 2);
    n += 1;
    return { system: systems[topic]!, question: `question ${n}: ${"why ".repeat(5 + (n % 7))}` };
  };
}

async function send(router: RunningRouter, req: { system: string; question: string }) {
  const res = await fetch(`${router.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model: "m",
      messages: [
        { role: "system", content: req.system },
        { role: "user", content: req.question },
      ],
      max_tokens: 1,
    }),
  });
  const body = (await res.json()) as {
    usage?: { prompt_tokens: number; prompt_tokens_details?: { cached_tokens: number } };
  };
  return {
    prompt: body.usage?.prompt_tokens ?? 0,
    cached: body.usage?.prompt_tokens_details?.cached_tokens ?? 0,
  };
}

/** Sends `count` requests, 8 at a time, over `routers` (each request to one at random). */
async function run(
  routers: RunningRouter[],
  next: () => { system: string; question: string },
  count: number,
  seed: number,
) {
  const random = mulberry32(seed);
  const per = new Map<RunningRouter, { prompt: number; cached: number }>();
  for (const r of routers) per.set(r, { prompt: 0, cached: 0 });
  let left = count;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (left > 0) {
        left -= 1;
        const router = routers[Math.floor(random() * routers.length)]!;
        const got = await send(router, next());
        const t = per.get(router)!;
        t.prompt += got.prompt;
        t.cached += got.cached;
      }
    }),
  );
  const all = [...per.values()].reduce(
    (a, b) => ({ prompt: a.prompt + b.prompt, cached: a.cached + b.cached }),
    { prompt: 0, cached: 0 },
  );
  const rate = (t: { prompt: number; cached: number }) =>
    t.prompt === 0 ? 0 : t.cached / t.prompt;
  return { hit: rate(all), per: routers.map((r) => rate(per.get(r)!)) };
}

async function fleet(n: number): Promise<SimWorker[]> {
  // A KV cache that holds a few topics per worker: where a prefix went matters.
  return Promise.all(
    Array.from({ length: n }, (_, i) =>
      startSimWorker({ id: `w${i}`, timeScale: 0, kvCapacityTokens: 6000 }),
    ),
  );
}

function router(workers: SimWorker[], extra: Record<string, unknown>) {
  return startRouter(
    configWith({
      host: "127.0.0.1",
      port: 0,
      logLevel: "silent",
      policy: "cache_aware",
      healthCheckIntervalSecs: 0,
      enginePollIntervalSecs: 0,
      workerUrls: workers.map((w) => w.url),
      ...extra,
    }),
    { logger: silent },
  );
}

async function filePart(window: number, warmup: number) {
  const rows: Record<string, unknown>[] = [];
  const dir = await mkdtemp(join(tmpdir(), "radixgate-warm-"));
  try {
    for (const mode of ["no restart", "restart, cold", "restart, --state-file"] as const) {
      const workers = await fleet(4);
      const next = workload(11, 24);
      const file = join(dir, `${mode.replace(/\W+/g, "-")}.snapshot`);
      const extra = mode === "restart, --state-file" ? { stateFile: file } : {};
      let r = await router(workers, extra);
      await run([r], next, warmup, 1);
      if (mode !== "no restart") {
        await r.stop(1000);
        r = await router(workers, extra);
      }
      const after = await run([r], next, window, 2);
      await r.stop(1000);
      await Promise.all(workers.map((w) => w.close()));
      rows.push({ mode, window_requests: window, hit_rate: +after.hit.toFixed(4) });
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  const base = rows[0]!.hit_rate as number;
  for (const row of rows)
    row.points_vs_no_restart = +(((row.hit_rate as number) - base) * 100).toFixed(1);
  console.log(`\n${"Single router restarted mid-run (hit rate over the next window)"}`);
  printTable(
    ["mode", "window_requests", "hit_rate", "points_vs_no_restart"],
    rows.map((r) => [r.mode, r.window_requests, r.hit_rate, r.points_vs_no_restart].map(String)),
  );
  return rows;
}

async function replicasPart(window: number, warmup: number) {
  const redis = await startLocalRedis();
  const rows: Record<string, unknown>[] = [];
  try {
    for (const mode of ["no restart", "restart, ops only", "restart, snapshot + ops"] as const) {
      const workers = await fleet(4);
      const next = workload(23, 24);
      const prefix = `b${randomBytes(4).toString("hex")}`;
      const shared = {
        stateUrl: redis.url,
        stateSecret: SECRET,
        stateKeyPrefix: prefix,
        stateStreamLength: 50,
        stateSnapshotIntervalMs: mode === "restart, snapshot + ops" ? 500 : 0,
      };
      const a = await router(workers, shared);
      let b = await router(workers, shared);
      await run([a, b], next, warmup, 3);
      if (mode !== "no restart") {
        // Past the stream's length: the ops alone no longer cover what the engines hold.
        await new Promise((resolve) => setTimeout(resolve, 700));
        await b.stop(1000);
        b = await router(workers, shared);
      }
      const after = await run([a, b], next, window, 4);
      // A third replica joins: its own hit rate over the window against its peers'.
      const c = await router(workers, shared);
      const third = await run([a, b, c], next, window, 5);
      for (const r of [a, b, c]) await r.stop(1000);
      await Promise.all(workers.map((w) => w.close()));
      rows.push({
        mode,
        window_requests: window,
        hit_rate: +after.hit.toFixed(4),
        third_replica_hit: +third.per[2]!.toFixed(4),
        its_peers_hit: +((third.per[0]! + third.per[1]!) / 2).toFixed(4),
      });
    }
  } finally {
    await redis.stop();
  }
  const base = rows[0]!.hit_rate as number;
  for (const row of rows)
    row.points_vs_no_restart = +(((row.hit_rate as number) - base) * 100).toFixed(1);
  console.log(
    `\n${"Two replicas (--state-url, stream of 50), one replaced mid-run; then a third added"}`,
  );
  printTable(
    [
      "mode",
      "window_requests",
      "hit_rate",
      "points_vs_no_restart",
      "third_replica_hit",
      "its_peers_hit",
    ],
    rows.map((r) =>
      [
        r.mode,
        r.window_requests,
        r.hit_rate,
        r.points_vs_no_restart,
        r.third_replica_hit,
        r.its_peers_hit,
      ].map(String),
    ),
  );
  return rows;
}

async function rampPart() {
  // Slow simulated engines (model time on) with a small batch, so concurrency saturates them.
  const workers = await Promise.all(
    Array.from({ length: 2 }, (_, i) =>
      startSimWorker({ id: `r${i}`, timeScale: 1, kvCapacityTokens: 4000 }),
    ),
  );
  const r = await router(workers, {
    fleetSignalIntervalSecs: 0,
    workerDefaultSlots: 4,
    workerPrefillTokensPerSec: 300,
    fleetScaleDownCooldownSecs: 3,
    // The engines' KV capacity, read from them: the cache pressure's denominator.
    enginePollIntervalSecs: 0.5,
  });
  // Compute phase: few topics (they fit in the KV caches); cache phase: one client cycling over
  // many topics, more than the caches hold together.
  const few = workload(31, 6);
  const many = workload(37, 400);
  let next = few;
  const samples: Record<string, unknown>[] = [];
  let concurrency = 0;
  let stop = false;
  const clients: Promise<void>[] = [];
  const setConcurrency = (n: number) => {
    while (concurrency < n) {
      const id = concurrency++;
      clients.push(
        (async () => {
          while (!stop && id < concurrency) await send(r, next());
        })(),
      );
    }
    concurrency = n;
  };
  const started = Date.now();
  const steps = [1, 2, 4, 8, 16, 16, 8, 2, 1, 0, 0, 0, 0, 0, 0, 0, -1, -1, -1, -1, -1, -1];
  for (const step of steps) {
    const n = step < 0 ? 1 : step;
    if (step < 0) next = many;
    setConcurrency(n);
    await new Promise((resolve) => setTimeout(resolve, 500));
    const s = r.context.capacity.sample();
    samples.push({
      t_s: +((Date.now() - started) / 1000).toFixed(1),
      clients: step < 0 ? "1 (many topics)" : n,
      slots_ratio: +s.slots.ratio.toFixed(2),
      prefill_ratio: +s.prefill.ratio.toFixed(2),
      desired: s.desired.get("*")!.desired,
      without_cooldown: s.desired.get("*")!.raw,
      cache_pressure: s.cache.ratio === null ? null : +s.cache.ratio.toFixed(2),
      short_of: s.shortOf,
    });
  }
  stop = true;
  concurrency = 0;
  await Promise.all(clients);
  await r.stop(1000);
  await Promise.all(workers.map((w) => w.close()));
  console.log(`\n${"Saturation signal over a load ramp (sampled every 0.5 s, cool-down 3 s)"}`);
  printTable(
    [
      "t_s",
      "clients",
      "slots_ratio",
      "prefill_ratio",
      "cache_pressure",
      "desired",
      "without_cooldown",
      "short_of",
    ],
    samples.map((s) =>
      [
        s.t_s,
        s.clients,
        s.slots_ratio,
        s.prefill_ratio,
        s.cache_pressure,
        s.desired,
        s.without_cooldown,
        s.short_of,
      ].map(String),
    ),
  );
  return samples;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      part: { type: "string" },
      window: { type: "string", default: "300" },
      warmup: { type: "string", default: "600" },
      chars: { type: "string", default: String(128 * 1024) },
    },
  });
  const window = Number(values.window);
  const warmup = Number(values.warmup);
  const parts = values.part === undefined ? ["size", "file", "replicas", "ramp"] : [values.part];
  const results: Record<string, unknown> = {
    machine: machineSummary(),
    command: commandLine("bench:warm-start"),
  };
  if (parts.includes("size")) results.size = await sizePart(Number(values.chars));
  if (parts.includes("file")) results.file = await filePart(window, warmup);
  if (parts.includes("replicas")) results.replicas = await replicasPart(window, warmup);
  if (parts.includes("ramp")) results.ramp = await rampPart();
  writeResults(RESULTS, results);
}

runIfEntryPoint(import.meta.url, main);
