/**
 * bench:routing's engine: for one workload, run the same requests through the real router once
 * per policy (and once pinned by the oracle, through one single-worker router per worker), each
 * time on a fresh simulated fleet so every row starts with cold caches, and measure what the
 * clients and workers saw.
 */
import { randomBytes, randomUUID } from "node:crypto";
import os from "node:os";
import { join } from "node:path";
import { hashString } from "../../sim/hash.js";
import type { SimStats } from "../../sim/worker.js";
import { openAiBody, poissonArrivals, type RequestSpec } from "../../sim/workloads.js";
import type { AccountTotals } from "../../src/cache-account/account-totals.js";
import { type Config, type ConfigOverrides, configWith, defaultConfig } from "../../src/config.js";
import { routingText } from "../../src/intake/routing-text.js";
import { createLogger } from "../../src/logger.js";
import { POLICY_NAMES, type PolicyName } from "../../src/scheduling/policy.js";
import { type RunningRouter, startRouter } from "../../src/server.js";
import { childFleetHost, type FleetHost, type FleetMember, inlineFleetHost } from "./fleet.js";
import { type LatencySummary, summarizeMs } from "./latency.js";
import { type LoadJob, type LoadRequest, loadAgent, type RequestOutcome, runLoad } from "./load.js";
import {
  countMediaFalseHits,
  emptyMediaFalseHits,
  type MediaFalseHits,
} from "./media-false-hits.js";
import { routersAccount } from "./routing-account.js";
import { diagnoseDecisions, emptyDiagnosis, type RoutingDiagnosis } from "./routing-diagnosis.js";
import {
  combineRepeats,
  pollPhaseMs,
  type RepeatFigures,
  type RowRun,
  type RowSpread,
} from "./routing-repeats.js";
import {
  applyKnobs,
  knobOverrides,
  parseRowLabel,
  type RowKnob,
  relaysToLeader,
} from "./routing-variants.js";
import {
  type PreparedWorkload,
  prepareWorkload,
  type RoutingPreset,
  type WorkloadName,
} from "./routing-workloads.js";

/** The replicas' shared --state-secret (new for every run). */
const BENCH_STATE_SECRET = randomBytes(24).toString("hex");

export const ORACLE_ROW = "oracle_sticky";
/** The router's default policy (or RunOptions.precisePolicy) on the engines' KV events (--kv-events, docs/kv-events.md). */
export const PRECISE_ROW = "precise";
export type RowName = PolicyName | typeof ORACLE_ROW | typeof PRECISE_ROW;
/** A row, or a router row with sources of variance switched off: `<row>:<knob>+<knob>` (routing-variants.ts). */
export type RowLabel = RowName | `${RowName}:${string}`;
export const ALL_ROWS: readonly RowName[] = [...POLICY_NAMES, PRECISE_ROW, ORACLE_ROW];
/** Share of a row's requests (in sending order) left out of warmTtftMs. */
export const WARM_SKIP = 0.1;

export interface RowResult {
  row: RowLabel;
  requests: number;
  errors: number;
  /** First error message, if any. */
  firstError: string | undefined;
  /** Fleet prefix-cache hit rate: Σ cachedTokens / Σ promptTokens over the workers. */
  hitRate: number;
  promptTokens: number;
  cachedTokens: number;
  ttftMs: LatencySummary;
  /**
   * TTFT of the requests sent after the first WARM_SKIP share of the run: the steady state of a
   * long-running fleet, without the cold start every row begins with.
   */
  warmTtftMs: LatencySummary;
  e2eMs: LatencySummary;
  wallMs: number;
  requestsPerSec: number;
  outputTokensPerSec: number;
  /** Inference requests each worker received, by worker id. */
  perWorker: Record<string, number>;
  /**
   * Busy share of this process's event loop (router + load client) during the row: well below 1
   * means neither the router nor the client was a bottleneck.
   */
  loopUtilization: number;
  /** Router decisions by branch (cache_hit, cache_miss, imbalanced, ...); empty for the oracle. */
  branches: Record<string, number>;
  /**
   * With bypass traffic: the hit rate (from the answers' usage) of the requests that went through
   * the router and of those that bypassed it.
   */
  split?: { routedHitRate: number; bypassHitRate: number };
  /** With RunOptions.diagnose: where the routed decisions lost cached tokens (routing-diagnosis.ts). */
  diagnosis?: RoutingDiagnosis;
  /** Workloads with images: claims on image messages a worker never got (media-false-hits.ts). */
  mediaFalseHits?: MediaFalseHits;
  /** The routers' cache account (routing-account.ts); absent for a row without an index. */
  account?: AccountTotals;
  /** Replicas sharing state: how long claims and peers' decisions took (routersSharing). */
  sharing?: SharingLags;
  /** Each repeat as it ran (RunOptions.repeats; absent in results written before issue 27). */
  repeats?: RepeatFigures[];
  /** Mean, minimum, maximum and spread over the repeats of the hit rate and the mean TTFT. */
  spread?: RowSpread;
}

export interface WorkloadReport {
  workload: WorkloadName;
  description: string;
  requests: number;
  workingSetTokens: number;
  /** KV cache of each simulated worker in this workload's fleets, tokens. */
  kvCapacityTokens: number;
  preset: RoutingPreset;
  /** Router replicas per router row (RunOptions.replicas). */
  replicas: number;
  /** The replicas shared state through Redis (RunOptions.sharedStateUrl). */
  sharedState: boolean;
  /** Share of requests that bypassed the router (RunOptions.bypassShare). */
  bypassShare: number;
  /** Where the bypassing requests went (RunOptions.bypassTo). */
  bypassTo: BypassTarget;
  arrival: string;
  rows: RowResult[];
}

export interface RunOptions {
  preset: RoutingPreset;
  /** Rows to run, in order (default: every policy, then the oracle where the workload has one). */
  rows?: readonly RowLabel[];
  /**
   * Runs of every row (default 1), interleaved (every row once, then every row again), each on
   * the same requests with timing seed `timingSeed + i`.
   */
  repeats?: number;
  /** The first repeat's timing seed (default 1): where the routers' engine polls fall. */
  timingSeed?: number;
  /** Open loop: Poisson arrivals at this many requests per second instead of the closed loop. */
  rate?: number;
  /** Run the simulated workers in a child process (default true). Ignored when `host` is given. */
  isolate?: boolean;
  /** Where fleets are started; by default a host made (and closed) for this call. */
  host?: FleetHost;
  /**
   * Requests sent per row before the measured rows, on throwaway fleets and routers, so that the
   * JIT has compiled the router, the client and the simulator before the first measurement
   * (default: 2 × concurrency; 0 = none).
   */
  warmupRequests?: number;
  /**
   * Rows already warmed in this process (JIT is process-wide; every row runs on a fresh fleet):
   * they skip the warm-up, and the rows this run warms are added. Unset: every run warms.
   */
  warmed?: Set<RowLabel>;
  /**
   * Share of requests (0-1) sent straight to a worker, bypassing the router (another client, or
   * another router's traffic), to the worker `bypassTo` picks. The same requests go to the same
   * workers in every row.
   */
  bypassShare?: number;
  /**
   * How the bypassing client picks its worker (BypassTarget). Default "sticky": an independent
   * client; "oracle" (the default before 2026-11-23 23:30 UTC) gives the oracle row foreknowledge.
   */
  bypassTo?: BypassTarget;
  /** Router settings on top of the defaults, e.g. { cacheLoadBound: 1.5 } (--cache-load-bound). */
  routerOverrides?: ConfigOverrides;
  /**
   * A directory each router of a measured run writes its decision trace to (--decision-trace),
   * one file per router: <workload>-<row>-t<timing seed>-r<replica>.jsonl.
   */
  decisionTraceDir?: string;
  /**
   * Router replicas per router row (default 1): each request goes to one of them (replicaOf); they
   * share no state (no --state-url), so each knows only what it routed, plus, in the precise row,
   * every worker's KV events (each replica subscribes to all of them). The oracle row ignores it.
   */
  replicas?: number;
  /**
   * A redis-server URL: the replicas of each router row share state through it (--state-url,
   * a key prefix of their own per row), instead of sharing nothing.
   */
  sharedStateUrl?: string;
  /** The precise row's policy (default: the router's default policy). */
  precisePolicy?: PolicyName;
  /**
   * Tally every router decision against the workers' caches (bench/lib/routing-diagnosis.ts);
   * needs the workers in this process (isolate false).
   */
  diagnose?: boolean;
  /** Progress: a row starts (with its request count), a request completes. */
  onRowStart?: (row: RowLabel, total: number) => void;
  onRequest?: (outcome: RequestOutcome) => void;
  onRowEnd?: (result: RowResult) => void;
}

export async function runRoutingWorkload(
  name: WorkloadName,
  o: RunOptions,
): Promise<WorkloadReport> {
  const workload = prepareWorkload(name, o.preset);
  const clients = workload.concurrency ?? o.preset.concurrency;
  const rows = (o.rows ?? ALL_ROWS).filter(
    (row) => row !== ORACLE_ROW || workload.oracle !== undefined,
  );
  const repeats = o.repeats ?? 1;
  if (!Number.isInteger(repeats) || repeats < 1) {
    throw new RangeError(`repeats must be a positive integer, got ${repeats}`);
  }
  const baseSeed = o.timingSeed ?? 1;
  const host = o.host ?? (o.isolate === false ? inlineFleetHost() : await childFleetHost());
  const results: RowResult[] = [];
  try {
    const warmup = Math.min(workload.specs.length, o.warmupRequests ?? 2 * clients);
    if (warmup > 0) {
      // Whole conversations only, so that no warm-up request waits for a turn it does not send.
      const specs = workload.specs.slice(0, warmup).filter((s) => (s.turn ?? 0) === 0);
      for (const row of rows) {
        if (o.warmed?.has(row) === true) continue;
        // Only the measured repeats are traced.
        await runRow(
          { ...workload, specs },
          row,
          { ...o, decisionTraceDir: undefined },
          host,
          baseSeed,
        );
        o.warmed?.add(row);
      }
    }
    // Interleaved: a spell of load on the machine falls on every row alike.
    const runs = new Map<RowLabel, RowRun[]>(rows.map((row) => [row, []]));
    const tallies = new Map<RowLabel, RoutingDiagnosis>();
    for (let i = 0; i < repeats; i++) {
      for (const row of rows) {
        o.onRowStart?.(row, workload.specs.length);
        if (o.diagnose === true && !tallies.has(row)) tallies.set(row, emptyDiagnosis());
        const run = await runRow(workload, row, o, host, baseSeed + i, tallies.get(row));
        o.onRowEnd?.(run.result);
        runs.get(row)!.push(run);
      }
    }
    for (const row of rows) results.push(combineRepeats(runs.get(row)!));
  } finally {
    if (o.host === undefined) await host.close();
  }
  return {
    workload: name,
    description: workload.description,
    requests: workload.specs.length,
    workingSetTokens: workload.workingSetTokens,
    kvCapacityTokens: workload.kvCapacityTokens,
    preset: o.preset,
    replicas: o.replicas ?? 1,
    sharedState: o.sharedStateUrl !== undefined && (o.replicas ?? 1) > 1,
    bypassShare: o.bypassShare ?? 0,
    bypassTo: o.bypassTo ?? "sticky",
    arrival:
      o.rate === undefined
        ? `closed loop, concurrency ${clients}`
        : `open loop, Poisson ${o.rate} req/s`,
    rows: results,
  };
}

async function runRow(
  w: PreparedWorkload,
  label: RowLabel,
  o: RunOptions,
  host: FleetHost,
  timingSeed: number,
  tally?: RoutingDiagnosis,
): Promise<RowRun> {
  const p = o.preset;
  const { base, knobs } = parseRowLabel(label);
  const row = base as RowName;
  if (knobs.length > 0 && (row === ORACLE_ROW || !ALL_ROWS.includes(row))) {
    throw new Error(`row "${label}": knobs apply to router rows only`);
  }
  const routerOverrides: ConfigOverrides = {
    ...o.routerOverrides,
    ...knobOverrides(knobs, w.kvCapacityTokens),
  };
  const loadAverage = os.loadavg()[0] ?? 0;
  const fleet = await host.startFleet({
    count: p.workers,
    worker: {
      timeScale: p.timeScale,
      kvCapacityTokens: w.kvCapacityTokens,
      ...(w.cpuTierTokens !== undefined ? { cpuTierTokens: w.cpuTierTokens } : {}),
      ...(w.flavor !== undefined ? { flavor: w.flavor } : {}),
      ...(usesKvEvents(row) ? { kvEvents: { encoding: "map" as const } } : {}),
    },
  });
  const urls = fleet.workers.map((x) => x.url);
  const logger = createLogger({ level: "silent" });
  // Router rows: one router, or `replicas` of them with no shared state, each knowing only what
  // it routed itself (plus, in the precise row, every worker's events).
  const routers: RunningRouter[] = [];
  const replicas = o.replicas ?? 1;
  // The oracle pins requests itself but still goes through the router's code: one single-worker
  // router per worker, so its TTFT carries the same proxy hop as the policies' rows.
  let pinned: RunningRouter[] = [];
  try {
    if (row === ORACLE_ROW) {
      pinned = await Promise.all(
        urls.map((url) =>
          startRouter(routerConfig("round_robin", [url], routerOverrides), { logger }),
        ),
      );
    } else {
      // With shared state, this row's replicas share one key prefix that no other row uses.
      const overrides: ConfigOverrides =
        o.sharedStateUrl !== undefined && replicas > 1
          ? {
              ...routerOverrides,
              stateUrl: o.sharedStateUrl,
              stateSecret: BENCH_STATE_SECRET,
              stateKeyPrefix: `bench-routing:${row}:${randomUUID()}:`,
            }
          : routerOverrides;
      for (let i = 0; i < replicas; i++) {
        const own = traced(overrides, o.decisionTraceDir, w, label, timingSeed, i);
        routers.push(
          row === PRECISE_ROW
            ? await startPreciseRouter(fleet.workers, o.precisePolicy, own)
            : usesKvEvents(row)
              ? await startPreciseRouter(fleet.workers, row as PolicyName, own)
              : await startRouter(routerConfig(row, urls, own), { logger }),
        );
      }
    }
  } catch (err) {
    await Promise.all([...pinned, ...routers].map((r) => r.stop(1000)));
    await fleet.close();
    throw err;
  }
  const pollTimers: NodeJS.Timeout[] = [];
  const phaseMs = scheduleEnginePolls([...routers, ...pinned], knobs, timingSeed, pollTimers);
  if (relaysToLeader(knobs)) await relaysKnown(routers);
  let diagnosis: RoutingDiagnosis | undefined;
  if (o.diagnose === true && routers.length > 0) {
    const sims = fleet.sims;
    if (sims === undefined) {
      for (const t of pollTimers) clearTimeout(t);
      await Promise.all(routers.map((r) => r.stop(0)));
      await fleet.close();
      throw new Error("diagnose needs the workers in this process (isolate: false, --no-isolate)");
    }
    const into = tally ?? emptyDiagnosis();
    for (const router of routers) diagnoseDecisions(router, sims, into);
    diagnosis = into;
  }
  let mediaFalseHits: MediaFalseHits | undefined;
  if (w.specs.some((spec) => spec.image !== undefined) && routers.length > 0) {
    mediaFalseHits = emptyMediaFalseHits();
    const imageOf = imageMessages(w.specs);
    for (const router of routers) countMediaFalseHits(router, imageOf, mediaFalseHits);
  }
  const clients = w.concurrency ?? p.concurrency;
  const concurrency = o.rate === undefined ? clients : w.specs.length;
  const dispatcher = loadAgent(concurrency);
  try {
    // A chat's turn waits for the previous turn's reply, whose id we look up by (chat, turn).
    const turnIds = new Map<string, string>();
    for (const spec of w.specs) {
      if (spec.conversation !== undefined)
        turnIds.set(`${spec.conversation}/${spec.turn}`, spec.id);
    }
    const bypassed: boolean[] = [];
    const jobs = w.specs.map((spec): LoadJob => {
      const direct = bypassTarget(spec, w, o.bypassShare ?? 0, urls.length, o.bypassTo);
      bypassed.push(direct !== undefined);
      const origin =
        direct !== undefined
          ? urls[direct]!
          : routers.length > 0
            ? routers[replicaOf(spec, routers.length)]!.url
            : pinned[w.oracle!(spec, pinned.length)]!.url;
      const job: LoadJob = { key: spec.id, request: requestFor(spec, origin) };
      const previous =
        spec.turn !== undefined ? turnIds.get(`${spec.conversation}/${spec.turn - 1}`) : undefined;
      if (previous !== undefined) job.after = previous;
      return job;
    });
    const gapsMs =
      o.rate === undefined ? undefined : poissonArrivals(o.rate, p.seed).gapsMs(jobs.length);
    const elu = performance.eventLoopUtilization();
    const run = await runLoad(jobs, {
      dispatcher,
      concurrency: clients,
      ...(gapsMs === undefined ? {} : { gapsMs }),
      onDone: (outcome) => o.onRequest?.(outcome),
    });
    const loopUtilization = performance.eventLoopUtilization(elu).utilization;
    const stats = await fleet.stats();
    const branches: Record<string, number> = {};
    for (const router of routers) {
      for (const v of (await router.context.metrics.decisions.get()).values) {
        const branch = String(v.labels.branch);
        branches[branch] = (branches[branch] ?? 0) + v.value;
      }
    }
    const result: RowResult = {
      ...summarizeRow(label, run.outcomes, run.wallMs, stats, branches),
      loopUtilization,
      ...((o.bypassShare ?? 0) > 0 ? { split: splitHitRates(run.outcomes, bypassed) } : {}),
      ...(diagnosis === undefined ? {} : { diagnosis }),
      ...(mediaFalseHits === undefined ? {} : { mediaFalseHits }),
    };
    const account = routersAccount(routers);
    if (account !== undefined && account.requests > 0) result.account = account;
    const sharing = await routersSharing(routers);
    if (sharing !== undefined) result.sharing = sharing;
    const ok = (x: RequestOutcome) => x.ok;
    return {
      result,
      repeat: {
        timingSeed,
        pollPhaseMs: phaseMs,
        loadAverage,
        hitRate: result.hitRate,
        ttftMeanMs: result.ttftMs.mean,
        warmTtftMeanMs: result.warmTtftMs.mean,
        e2eMeanMs: result.e2eMs.mean,
        requestsPerSec: result.requestsPerSec,
        errors: result.errors,
        perWorker: result.perWorker,
      },
      ttftMs: run.outcomes.filter(ok).map((x) => x.ttftMs),
      warmTtftMs: run.outcomes
        .slice(Math.floor(run.outcomes.length * WARM_SKIP))
        .filter(ok)
        .map((x) => x.ttftMs),
      e2eMs: run.outcomes.filter(ok).map((x) => x.e2eMs),
    };
  } finally {
    for (const t of pollTimers.splice(0)) clearTimeout(t);
    await dispatcher.close();
    await Promise.all([...routers, ...pinned].map((r) => r.stop(1000)));
    await fleet.close();
  }
}

/** A router's settings with its own decision trace file, when traces were asked for. */
function traced(
  overrides: ConfigOverrides,
  dir: string | undefined,
  w: PreparedWorkload,
  label: RowLabel,
  timingSeed: number,
  replica: number,
): ConfigOverrides {
  if (dir === undefined) return overrides;
  const file = `${w.name}-${label.replace(/[^\w.+-]/g, "_")}-t${timingSeed}-r${replica}.jsonl`;
  return { ...overrides, decisionTrace: join(dir, file) };
}

/**
 * The timing seed of a repeat sets where the routers' periodic engine polls fall: each router's
 * poll timer is restarted so that its first periodic read comes `pollPhaseMs(seed)` after now (the
 * read when a worker is added has happened already). Knob `poll-frozen`: no periodic read at all.
 * Returns the phase; the timers go into `timers` (cleared when the row ends).
 */
function scheduleEnginePolls(
  routers: readonly RunningRouter[],
  knobs: readonly RowKnob[],
  timingSeed: number,
  timers: NodeJS.Timeout[],
): number {
  const intervalMs = routers[0]?.context.introspection.options.intervalMs ?? 0;
  const phase = pollPhaseMs(timingSeed, intervalMs);
  for (const router of routers) {
    applyKnobs(router, knobs);
    if (intervalMs <= 0 || knobs.includes("poll-frozen")) continue;
    const introspection = router.context.introspection;
    introspection.stop();
    timers.push(setTimeout(() => introspection.start(), phase));
  }
  return phase;
}

/**
 * The replica a request goes to, as an L4 balancer in front of the replicas would spread them:
 * by a hash of its id (every request, each turn of a chat too), the same in every row.
 */
export function replicaOf(spec: RequestSpec, replicas: number): number {
  return replicas <= 1 ? 0 : (hashString(`replica/${spec.id}`) >>> 4) % replicas;
}

/**
 * How a client that bypasses the router picks its worker:
 * - `oracle`: the oracle row's worker for the request's group (`group mod workers`). The oracle
 *   row then knows in advance where the other client's traffic lands; no router can.
 * - `sticky`: a client that pins each group by a mapping of its own (a salted hash of the group),
 *   which neither the routers nor the oracle know.
 * - `spread`: a client that sends each request to a worker chosen by a hash of its id.
 * Workloads without groups fall back to `spread`.
 */
export const BYPASS_TARGETS = ["oracle", "sticky", "spread"] as const;
export type BypassTarget = (typeof BYPASS_TARGETS)[number];

/** The worker a bypassing request goes to straight, or undefined when it goes through the router. */
export function bypassTarget(
  spec: RequestSpec,
  w: Pick<PreparedWorkload, "group" | "oracle">,
  share: number,
  workers: number,
  to: BypassTarget = "sticky",
): number | undefined {
  if (share <= 0) return undefined;
  const h = hashString(spec.id);
  if ((h % 10_000) / 10_000 >= share) return undefined;
  if (to === "oracle" && w.oracle !== undefined) return w.oracle(spec, workers);
  if (to === "sticky" && w.group !== undefined)
    return (hashString(`bypass/${w.group(spec)}`) >>> 4) % workers;
  return (h >>> 8) % workers;
}

/** A policy with --kv-events, every worker added with its own event endpoints, all streams live. */
/**
 * Rows whose router reads the engines' KV events: the precise row, and the precise_weighted
 * profile (llm-d's precise prefix scorer is defined over them; docs/scheduling.md).
 */
function usesKvEvents(row: RowName): boolean {
  return row === PRECISE_ROW || row === "precise_weighted";
}

async function startPreciseRouter(
  workers: readonly FleetMember[],
  policy: PolicyName = defaultConfig().policies.policy,
  overrides: ConfigOverrides = {},
): Promise<RunningRouter> {
  const router = await startRouter(
    routerConfig(policy, [], {
      ...overrides,
      kvEvents: true,
      kvEventsEndpointTemplate: "",
    }),
    { logger: createLogger({ level: "silent" }) },
  );
  const kv = router.context.kvEvents!;
  for (const member of workers) {
    // With shared state a replica started second already has the workers its peer added.
    const worker =
      router.context.registry.get(member.url) ?? router.context.registry.add(member.url);
    if (member.kvEvents !== undefined) kv.configure(worker, member.kvEvents);
  }
  const deadline = Date.now() + 30_000;
  while (!workers.every((m) => kv.isLive(router.context.registry.get(m.url)!.id))) {
    if (Date.now() > deadline) {
      await router.stop(0);
      throw new Error("precise row: the workers' KV-event streams did not come up within 30 s");
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return router;
}

/**
 * Row knobs `relay`, `relay-all`, `relay-decisions`: waits (at most 5 s) until every replica but the leader relays to
 * it, so the row's first requests are not decided with claims while the advertised URLs spread.
 */
async function relaysKnown(routers: readonly RunningRouter[]): Promise<void> {
  if (routers.length < 2) return;
  const deadline = Date.now() + 5000;
  const known = () =>
    routers.every((r) => {
      const replication = r.context.replication;
      return replication?.decidesAlone() === true || replication?.relayTarget() !== undefined;
    });
  while (!known()) {
    if (Date.now() > deadline)
      throw new Error("row knob relay: the replicas never saw the leader's URL");
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** The real router's defaults, listening on a free loopback port (unless given one), silent. */
export function routerConfig(
  policy: PolicyName,
  workerUrls: string[],
  overrides: ConfigOverrides = {},
): Config {
  return configWith({
    host: "127.0.0.1",
    port: 0,
    logLevel: "silent",
    // A port of its own only where a replica advertises it (bench:replicas' relaying rows).
    ...overrides,
    policy,
    workerUrls,
  });
}

/** A streaming OpenAI request for a spec, with usage in the last chunk. */
export function requestFor(spec: RequestSpec, origin: string): LoadRequest {
  const body = { ...openAiBody(spec), stream: true, stream_options: { include_usage: true } };
  return {
    origin,
    path: spec.kind === "chat" ? "/v1/chat/completions" : "/v1/completions",
    body: JSON.stringify(body),
    stream: true,
  };
}

function summarizeRow(
  row: RowLabel,
  outcomes: readonly RequestOutcome[],
  wallMs: number,
  stats: readonly SimStats[],
  branches: Record<string, number>,
): Omit<RowResult, "loopUtilization" | "diagnosis" | "split"> {
  const ok = outcomes.filter((x) => x.ok);
  const failed = outcomes.filter((x) => !x.ok);
  let promptTokens = 0;
  let cachedTokens = 0;
  const perWorker: Record<string, number> = {};
  for (const s of stats) {
    promptTokens += s.promptTokens;
    cachedTokens += s.cachedTokens;
    perWorker[s.id] = s.requests;
  }
  const outputTokens = ok.reduce((sum, x) => sum + x.outputTokens, 0);
  return {
    row,
    requests: outcomes.length,
    errors: failed.length,
    firstError: failed[0]?.error,
    hitRate: promptTokens === 0 ? 0 : cachedTokens / promptTokens,
    promptTokens,
    cachedTokens,
    ttftMs: summarizeMs(ok.map((x) => x.ttftMs)),
    warmTtftMs: summarizeMs(
      outcomes
        .slice(Math.floor(outcomes.length * WARM_SKIP))
        .flatMap((x) => (x.ok ? [x.ttftMs] : [])),
    ),
    e2eMs: summarizeMs(ok.map((x) => x.e2eMs)),
    wallMs,
    requestsPerSec: (ok.length * 1000) / wallMs,
    outputTokensPerSec: (outputTokens * 1000) / wallMs,
    perWorker,
    branches,
  };
}

/** Hit rates of the routed and the bypassing requests, from the usage each answer reported. */
function splitHitRates(outcomes: readonly RequestOutcome[], bypassed: readonly boolean[]) {
  const sums = [
    { prompt: 0, cached: 0 },
    { prompt: 0, cached: 0 },
  ];
  outcomes.forEach((x, i) => {
    const sum = sums[bypassed[i] ? 1 : 0]!;
    sum.prompt += x.promptTokens ?? 0;
    sum.cached += x.cachedTokens ?? 0;
  });
  const rate = (s: { prompt: number; cached: number }) =>
    s.prompt === 0 ? 0 : s.cached / s.prompt;
  return { routedHitRate: rate(sums[0]!), bypassHitRate: rate(sums[1]!) };
}

/**
 * The routing text of each spec with an image → the image (its group) and where its image
 * message's content starts in that text (after the last message's role marker).
 */
function imageMessages(specs: readonly RequestSpec[]) {
  const byText = new Map<string, { image: number; contentStart: number }>();
  for (const spec of specs) {
    if (spec.image === undefined) continue;
    const text = routingText("chat", openAiBody(spec));
    const marker = `<${spec.messages?.at(-1)?.role ?? "user"}>`;
    byText.set(text, {
      image: spec.group ?? 0,
      contentStart: text.lastIndexOf(marker) + marker.length,
    });
  }
  return (text: string) => byText.get(text);
}

/** Sums and counts of the replicas' claim round trips and peers' op delays (seconds). */
export interface SharingLags {
  claimSeconds: number;
  claims: number;
  opDelaySeconds: number;
  ops: number;
  /** Cumulative counts by bucket bound (seconds, as the histograms' `le`), summed over replicas. */
  claimBuckets: Record<string, number>;
  opBuckets: Record<string, number>;
  /** Requests relayed to the leader (row knob relay), and those that fell back to a claim. */
  relayed: number;
  relayFallbacks: number;
}

/**
 * The bucket bound (ms) at or under which a share `q` of the observations fall, from cumulative
 * bucket counts; undefined with none.
 */
export function bucketQuantileMs(
  buckets: Readonly<Record<string, number>>,
  q: number,
): number | undefined {
  const bounds = Object.entries(buckets)
    .map(([le, n]) => [le === "+Inf" ? Number.POSITIVE_INFINITY : Number(le), n] as const)
    .sort((x, y) => x[0] - y[0]);
  const total = bounds.at(-1)?.[1] ?? 0;
  if (total === 0) return undefined;
  const found = bounds.find(([, n]) => n >= q * total);
  return found === undefined ? undefined : found[0] * 1000;
}

/**
 * What the row's replicas measured of their shared state (radixgate_state_claim_seconds,
 * radixgate_state_op_delay_seconds): the real latencies the replay's --replica-delay-ms models.
 * Undefined without shared state.
 */
async function routersSharing(routers: readonly RunningRouter[]): Promise<SharingLags | undefined> {
  const lags: SharingLags = {
    claimSeconds: 0,
    claims: 0,
    opDelaySeconds: 0,
    ops: 0,
    claimBuckets: {},
    opBuckets: {},
    relayed: 0,
    relayFallbacks: 0,
  };
  let found = false;
  for (const router of routers) {
    const registry = router.context.metrics.registry;
    const relays = registry.getSingleMetric("radixgate_state_relays_total");
    for (const v of relays === undefined ? [] : (await relays.get()).values) {
      if (v.labels.outcome === "relayed") lags.relayed += v.value;
      if (v.labels.outcome === "fallback") lags.relayFallbacks += v.value;
    }
    for (const [name, sum, count, buckets] of [
      ["radixgate_state_claim_seconds", "claimSeconds", "claims", "claimBuckets"],
      ["radixgate_state_op_delay_seconds", "opDelaySeconds", "ops", "opBuckets"],
    ] as const) {
      const metric = registry.getSingleMetric(name);
      if (metric === undefined) continue;
      found = true;
      // A histogram's values carry their series' name (prom-client's MetricValueWithName).
      const values = (await metric.get()).values as {
        metricName?: string;
        value: number;
        labels: { le?: string | number };
      }[];
      for (const v of values) {
        if (v.metricName === `${name}_sum`) lags[sum] += v.value;
        if (v.metricName === `${name}_count`) lags[count] += v.value;
        if (v.metricName === `${name}_bucket` && v.labels.le !== undefined) {
          const le = String(v.labels.le);
          lags[buckets][le] = (lags[buckets][le] ?? 0) + v.value;
        }
      }
    }
  }
  return found ? lags : undefined;
}
