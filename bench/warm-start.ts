/**
 * Warm start: what a restart or a new replica costs in hit rate, with and without the index
 * snapshot, and what a snapshot costs to write and load.
 *
 *   npm run bench:warm-start                   every part (about 12 minutes on a quiet machine:
 *                                              file 3.5, replicas 6.5, ramp 0.75, size 1)
 *   npm run bench:warm-start -- --part ramp    one part: size | file | replicas | ramp
 *   npm run bench:warm-start -- --window-secs 10   a quick run (shorter hit-rate windows)
 *
 * - size: snapshot bytes, write and load time, and the longest event-loop stall while loading
 *   (a 1 ms timer's worst lateness, which is what /health would wait) for 16 and 256 workers at
 *   full trees of --chars characters each (default 131072: scaled down from an engine's KV).
 * - file: one router (no Redis) on simulated workers; after a warm-up of --warmup requests it is
 *   restarted (workers and their KV caches stay up) cold, or with --state-file; the hit rate
 *   over the next --window-secs (the engines' cached tokens over prompt tokens) against the same
 *   window without a restart.
 * - replicas: two replicas (--state-url, a real redis-server; requests spread at random) with an
 *   ops stream kept to 50 entries; after more decisions than that, one replica is replaced by a
 *   new one, with the snapshot or without; then a third replica is added: its own hit rate over
 *   the window against its peers'.
 * - ramp: the saturation signal, polled by the router, while the simulator's load ramps up and
 *   down, then one client over more topics than the caches hold; prints pass/fail per target.
 *
 * Windows are time-based, as the targets' "next 60 s" (--window-secs, default 60), with requests
 * arriving at --rate a second (default 5: 300 requests a window) whatever the machine's speed.
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
import { DEFAULT_TIMING } from "../sim/timing.js";
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

async function send(
  router: RunningRouter,
  req: { system: string; question: string },
  maxTokens = 1,
) {
  const res = await fetch(`${router.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model: "m",
      messages: [
        { role: "system", content: req.system },
        { role: "user", content: req.question },
      ],
      max_tokens: maxTokens,
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

/** A hit-rate window: a number of requests sent at once (warm-up), or `secs` of paced arrivals. */
type Timed = { secs: number; rate: number };
type Window = { count: number } | Timed;

/**
 * Sends the window's requests over `routers` (each to one at random), at most 8 at a time: a
 * count as fast as they answer (warm-up), or arrivals every 1/rate s for `secs` (the targets'
 * "next 60 s": time-based, and paced, so a window holds the same requests on a fast machine or a
 * loaded one).
 */
async function run(
  routers: RunningRouter[],
  next: () => { system: string; question: string },
  window: Window,
  seed: number,
) {
  const random = mulberry32(seed);
  const per = new Map<RunningRouter, { prompt: number; cached: number }>();
  for (const r of routers) per.set(r, { prompt: 0, cached: 0 });
  const one = async () => {
    const router = routers[Math.floor(random() * routers.length)]!;
    const got = await send(router, next());
    const t = per.get(router)!;
    t.prompt += got.prompt;
    t.cached += got.cached;
  };
  if ("count" in window) {
    let left = window.count;
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (left > 0) {
          left -= 1;
          await one();
        }
      }),
    );
  } else {
    const start = performance.now();
    const total = Math.round(window.secs * window.rate);
    const inFlight = new Set<Promise<void>>();
    for (let i = 0; i < total; i++) {
      const due = start + (i * 1000) / window.rate;
      const wait = due - performance.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      if (inFlight.size >= 8) await Promise.race(inFlight);
      const p: Promise<void> = one().finally(() => inFlight.delete(p));
      inFlight.add(p);
    }
    await Promise.all(inFlight);
  }
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

async function filePart(window: Timed, warmup: number) {
  const rows: Record<string, unknown>[] = [];
  const dir = await mkdtemp(join(tmpdir(), "radixgate-warm-"));
  try {
    for (const mode of ["no restart", "restart, cold", "restart, --state-file"] as const) {
      const workers = await fleet(4);
      const next = workload(11, 24);
      const file = join(dir, `${mode.replace(/\W+/g, "-")}.snapshot`);
      const extra = mode === "restart, --state-file" ? { stateFile: file } : {};
      let r = await router(workers, extra);
      await run([r], next, { count: warmup }, 1);
      if (mode !== "no restart") {
        await r.stop(1000);
        r = await router(workers, extra);
      }
      const after = await run([r], next, window, 2);
      await r.stop(1000);
      await Promise.all(workers.map((w) => w.close()));
      rows.push({ mode, window_secs: window.secs, hit_rate: +after.hit.toFixed(4) });
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  const base = rows[0]!.hit_rate as number;
  for (const row of rows)
    row.points_vs_no_restart = +(((row.hit_rate as number) - base) * 100).toFixed(1);
  console.log(`\n${"Single router restarted mid-run (hit rate over the next window)"}`);
  printTable(
    ["mode", "window_secs", "hit_rate", "points_vs_no_restart"],
    rows.map((r) => [r.mode, r.window_secs, r.hit_rate, r.points_vs_no_restart].map(String)),
  );
  return rows;
}

async function replicasPart(window: Timed, warmup: number) {
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
      await run([a, b], next, { count: warmup }, 3);
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
        window_secs: window.secs,
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
      "window_secs",
      "hit_rate",
      "points_vs_no_restart",
      "third_replica_hit",
      "its_peers_hit",
    ],
    rows.map((r) =>
      [
        r.mode,
        r.window_secs,
        r.hit_rate,
        r.points_vs_no_restart,
        r.third_replica_hit,
        r.its_peers_hit,
      ].map(String),
    ),
  );
  return rows;
}

/** One observation of the ramp: the router's last sample and the engines' own counts. */
interface RampObservation {
  t_s: number;
  phase: string;
  clients: number;
  /** Requests the engines run or queue (their batch caps: 2 x maxRunning). */
  engine_in_flight: number;
  engine_waiting: number;
  slots_ratio: number;
  prefill_ratio: number;
  cache_pressure: number | null;
  desired: number;
  without_cooldown: number;
  short_of: string;
}

/**
 * The ramp's targets, checked over its observations:
 * - rise: desired workers exceeds the fleet's workers within 2 poll intervals of saturation: the
 *   engines' batches full (running + waiting reach their slots), after the load step with as
 *   many clients as slots;
 * - fall: desired workers stays up for the cool-down after the last sample that asked for more
 *   workers, and is back at the fleet's size within the cool-down + 2 polls of the load falling
 *   under the target;
 * - separation: at the compute peak the fleet is short of compute with a cache pressure under 1;
 *   in the last half of the many-topics phase it is short of cache, not of compute.
 */
function checkRamp(
  obs: readonly RampObservation[],
  steps: { saturatedAt: number; relievedAt: number },
  fleet: { workers: number; slots: number; pollS: number; cooldownS: number },
): { target: string; measured: string; pass: boolean }[] {
  const { workers, pollS, cooldownS } = fleet;
  // Saturation as the engines see it: their batches full (running + waiting >= their slots),
  // after the load step meant to fill them (on a loaded machine the clients take a while to).
  const full = obs.find((o) => o.t_s >= steps.saturatedAt && o.engine_in_flight >= fleet.slots);
  const firstUp =
    full === undefined ? undefined : obs.find((o) => o.t_s >= full.t_s && o.desired > workers);
  const riseS = full === undefined || firstUp === undefined ? undefined : firstUp.t_s - full.t_s;
  const fromStep = firstUp === undefined ? undefined : firstUp.t_s - steps.saturatedAt;
  const firstDown = obs.find((o) => o.t_s >= steps.relievedAt && o.desired <= workers);
  const fallS = firstDown === undefined ? undefined : firstDown.t_s - steps.relievedAt;
  const lastHigh = obs.findLast(
    (o) => firstDown !== undefined && o.t_s < firstDown.t_s && o.without_cooldown > workers,
  );
  const heldS =
    firstDown === undefined || lastHigh === undefined ? undefined : firstDown.t_s - lastHigh.t_s;
  const peak = obs.filter(
    (o) => o.phase === "compute" && o.clients === Math.max(...obs.map((p) => p.clients)),
  );
  const many = obs.filter((o) => o.phase === "many topics");
  const lateMany = many.slice(Math.floor(many.length / 2));
  const computeShort = (o: RampObservation) =>
    o.short_of === "compute" || o.short_of === "compute_and_cache";
  const peakOk =
    peak.length > 0 &&
    peak.filter(computeShort).length >= peak.length / 2 &&
    peak.every((o) => o.cache_pressure !== null && o.cache_pressure < 1);
  const manyOk = lateMany.length > 0 && lateMany.every((o) => o.short_of === "cache");
  const fmt = (s: number | undefined) => (s === undefined ? "never" : `${s.toFixed(2)} s`);
  return [
    {
      target: `rise: desired > ${workers} within 2 polls (${2 * pollS} s) of saturation (the engines' batches full)`,
      measured: `${fmt(riseS)} (${fmt(fromStep)} after the load step)`,
      pass: riseS !== undefined && riseS <= 2 * pollS,
    },
    {
      target: `fall: held the cool-down (${cooldownS} s) after the last sample asking for more, back to ${workers} within ${cooldownS + 2 * pollS} s of relief`,
      measured: `held ${fmt(heldS)}, back ${fmt(fallS)} after relief`,
      pass:
        heldS !== undefined &&
        fallS !== undefined &&
        heldS >= cooldownS - 0.05 &&
        fallS <= cooldownS + 2 * pollS,
    },
    {
      target: "compute peak: short of compute, cache pressure < 1",
      measured: peak
        .map((o) => `${o.short_of}/${o.cache_pressure ?? "-"}`)
        .slice(0, 4)
        .join(" "),
      pass: peakOk,
    },
    {
      target: "many topics, 1 client: short of cache only (pressure > 1, saturation < target)",
      measured: lateMany
        .map((o) => `${o.short_of}/${o.cache_pressure ?? "-"}`)
        .slice(0, 4)
        .join(" "),
      pass: manyOk,
    },
  ];
}

async function rampPart() {
  // Engines in model time with a small batch (4 running each), so 8 clients fill the fleet's
  // slots; the router is told the simulator's real prefill throughput, so the prefill ratio is on
  // the same scale as the engines (a smaller figure makes every cache miss read as saturation).
  const maxRunning = 4;
  const prefillTokensPerSec = DEFAULT_TIMING.prefillTokensPerSec;
  const pollS = 0.5;
  const cooldownS = 3;
  const workers = await Promise.all(
    Array.from({ length: 2 }, (_, i) =>
      startSimWorker({
        id: `r${i}`,
        timeScale: 1,
        kvCapacityTokens: 6000,
        maxRunning,
        prefillTokensPerSec,
      }),
    ),
  );
  const r = await router(workers, {
    fleetSignalIntervalSecs: pollS,
    fleetScaleDownCooldownSecs: cooldownS,
    workerPrefillTokensPerSec: prefillTokensPerSec,
    // The engines' KV capacity and batch size, read from them.
    enginePollIntervalSecs: 0.5,
  });
  const target = r.context.capacity.options.targetUtilization;
  const slots = workers.length * maxRunning;
  // Compute phase: few topics (they fit in the KV caches), clients ramping up and down; cache
  // phase: one client over many topics, more than the caches hold together.
  const few = workload(31, 6);
  const many = workload(37, 400);
  let next = few;
  // Compute phase: 32 output tokens (~0.2 s in the engine), so a client's request is in flight
  // most of the time even when the machine is loaded; cache phase: 1, so one client walks
  // through many topics.
  let maxTokens = 32;
  let concurrency = 0;
  let stop = false;
  const clients: Promise<void>[] = [];
  const setConcurrency = (n: number) => {
    while (concurrency < n) {
      const id = concurrency++;
      clients.push(
        (async () => {
          while (!stop && id < concurrency) await send(r, next(), maxTokens);
        })(),
      );
    }
    concurrency = n;
  };
  const phases: { phase: string; clients: number; secs: number }[] = [
    ...[1, 2, 4, 8, 16, 8, 2].map((clients) => ({ phase: "compute", clients, secs: 2 })),
    { phase: "idle", clients: 0, secs: cooldownS + 3 * pollS },
    { phase: "many topics", clients: 1, secs: 8 },
  ];
  const started = Date.now();
  const sinceStart = (at: number) => +((at - started) / 1000).toFixed(2);
  const obs: RampObservation[] = [];
  let saturatedAt: number | undefined;
  let relievedAt: number | undefined;
  for (const step of phases) {
    if (step.phase === "many topics") {
      next = many;
      maxTokens = 1;
    }
    setConcurrency(step.clients);
    const stepAt = sinceStart(Date.now());
    // Saturated: as many requests as the engines' slots (full batches; one more queues);
    // relieved: under the target utilisation again.
    if (step.clients >= slots && saturatedAt === undefined) saturatedAt = stepAt;
    if (saturatedAt !== undefined && step.clients < target * slots && relievedAt === undefined)
      relievedAt = stepAt;
    const until = Date.now() + step.secs * 1000;
    let seen = r.context.capacity.last?.at;
    while (Date.now() < until) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      const s = r.context.capacity.last;
      if (s === undefined || s.at === seen) continue;
      seen = s.at;
      const engines = workers.map((w) => w.stats());
      obs.push({
        t_s: sinceStart(s.at),
        phase: step.phase,
        clients: step.clients,
        engine_in_flight: engines.reduce((n, e) => n + e.running + e.waiting, 0),
        engine_waiting: engines.reduce((n, e) => n + e.waiting, 0),
        slots_ratio: +s.slots.ratio.toFixed(2),
        prefill_ratio: +s.prefill.ratio.toFixed(3),
        cache_pressure: s.cache.ratio === null ? null : +s.cache.ratio.toFixed(2),
        desired: s.desired.get("*")!.desired,
        without_cooldown: s.desired.get("*")!.raw,
        short_of: s.shortOf,
      });
    }
  }
  stop = true;
  concurrency = 0;
  await Promise.all(clients);
  await r.stop(1000);
  await Promise.all(workers.map((w) => w.close()));
  console.log(
    `\nSaturation signal over a load ramp (2 workers x ${maxRunning} slots, saturated at ${slots} clients, polled every ${pollS} s, cool-down ${cooldownS} s, target utilisation ${target})`,
  );
  const columns: (keyof RampObservation)[] = [
    "t_s",
    "phase",
    "clients",
    "engine_in_flight",
    "engine_waiting",
    "slots_ratio",
    "prefill_ratio",
    "cache_pressure",
    "desired",
    "without_cooldown",
    "short_of",
  ];
  printTable(
    columns,
    obs.map((o) => columns.map((c) => String(o[c]))),
  );
  const checks = checkRamp(
    obs,
    { saturatedAt: saturatedAt ?? Number.NaN, relievedAt: relievedAt ?? Number.NaN },
    { workers: workers.length, slots, pollS, cooldownS },
  );
  console.log(`\nRamp targets (saturation at ${saturatedAt} s, relief at ${relievedAt} s)`);
  printTable(
    ["target", "measured", "result"],
    checks.map((c) => [c.target, c.measured, c.pass ? "pass" : "FAIL"]),
  );
  return { saturated_at_s: saturatedAt, relieved_at_s: relievedAt, checks, observations: obs };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      part: { type: "string" },
      "window-secs": { type: "string", default: "60" },
      rate: { type: "string", default: "5" },
      warmup: { type: "string", default: "600" },
      chars: { type: "string", default: String(128 * 1024) },
    },
  });
  const window = { secs: Number(values["window-secs"]), rate: Number(values.rate) };
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
