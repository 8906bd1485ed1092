/**
 * Where time to first token goes, per policy, in a deterministic model-time replay of a
 * bench:routing workload (bench/lib/ttft-replay.ts: the simulator's engines on a virtual clock,
 * the router's decider, index and policy, the closed-loop client; no HTTP, no CPU noise).
 *
 *   npm run bench:ttft -- [--workload cache-pressure] [--policies prefix_cost,cache_aware] [--quick]
 *
 * For each row (each policy, then the workload's oracle) it prints the hit rate, the mean TTFT in
 * model ms and in the bench's real ms (× timeScale), and its split: wait before admission, own
 * prefill, other requests' prefill in the same steps, the rest of those steps (decode, floor),
 * and the mean TTFT each request would have alone on an idle engine with the same cache hits
 * (the floor no placement can beat without more hits). Then, per policy, the difference to the
 * oracle, component by component, and by kind of request. "start" is the share of the mean TTFT
 * owed to the cold start (the first `concurrency` requests, all sent at once to empty caches),
 * "steady" the mean TTFT of every later request.
 */
import { parseArgs } from "node:util";
import { DEFAULT_TIER_WEIGHTS, parseTierWeights } from "../src/index/kv-tiers.js";
import {
  createPolicy,
  isPolicyName,
  type PolicyOptions,
} from "../src/scheduling/builtin-profiles.js";
import type { TieBreak } from "../src/scheduling/options.js";
import type { PolicyName } from "../src/scheduling/policy.js";
import { runIfEntryPoint } from "./lib/entry.js";
import { fmt } from "./lib/latency.js";
import {
  FULL_PRESET,
  prepareWorkload,
  QUICK_PRESET,
  WORKLOADS,
  type WorkloadName,
} from "./lib/routing-workloads.js";
import { printTable } from "./lib/stats.js";
import { type ReplayedRequest, type ReplayResult, replay } from "./lib/ttft-replay.js";

const COMPONENTS = ["ttft", "wait", "own", "others", "rest", "alone"] as const;

function mean(values: readonly number[]): number {
  return values.length === 0 ? Number.NaN : values.reduce((s, v) => s + v, 0) / values.length;
}

function meanOf(requests: readonly ReplayedRequest[], key: (typeof COMPONENTS)[number]): number {
  return mean(requests.map((r) => r[key]));
}

/**
 * The cold start (the first `concurrency` requests: every lane's first, sent at once to empty
 * caches) and the steady state (every later request), by arrival.
 */
function splitAtStart(r: ReplayResult, concurrency: number) {
  const byArrival = [...r.requests].sort((a, b) => a.arrival - b.arrival);
  return { start: byArrival.slice(0, concurrency), steady: byArrival.slice(concurrency) };
}

/** The cold start's share of the mean TTFT: Σ TTFT of its requests / all requests. */
function startShare(start: readonly ReplayedRequest[], requests: number): number {
  return start.reduce((sum, x) => sum + x.ttft, 0) / requests;
}

/** Kinds of request, by what the engine found cached. */
const KINDS = ["hit ≥ 90%", "partial 50-90%", "miss < 50%"] as const;

/** Which of KINDS a request is, by its share of prompt tokens found cached. */
function kindOf(r: ReplayedRequest): (typeof KINDS)[number] {
  const share = r.cachedTokens / r.promptTokens;
  if (share >= 0.9) return KINDS[0];
  if (share >= 0.5) return KINDS[1];
  return KINDS[2];
}

const USAGE = [
  "usage: npm run bench:ttft -- [options]",
  `  --workload <${WORKLOADS.join("|")}>  (default cache-pressure)`,
  "  --policies <a,b>              policies to replay, then the workload's oracle (default prefix_cost)",
  "  --quick                       bench:routing's quick preset (default: the full one)",
  "  --seed <n>                    workload seed (default 42)",
  "  --engine-poll-secs <s>        the router's engine poll interval, real seconds (default 5; 0 = off)",
  "  --poll-phase-ms <ms>          where the first poll falls, model ms (default 0)",
  "  --poll-sweep <n>              replay n poll phases and print TTFT / oracle for each policy",
  "  --foreign-against-now         count the engine's foreign queue against the router's count now",
  "                                (the old rule), not the count at the reading",
  "  --queue-weight <x>, --request-chars <n>, --eviction-weight <x>   prefix_cost's weights",
  "  --tie-break <hash|rotation>   prefix_cost's tie-break (default hash)",
  "  --cache-load-bound <x>        cache_aware's load cap (the router's --cache-load-bound)",
  "  --kv-events                   each policy over the engines' KV events (the precise index), with",
  "                                --kv-tier-weights' default, then tier-blind (gpu=1,cpu=0,disk=0)",
].join("\n");

function parseCli(): ReturnType<typeof parseArgs<{ options: typeof OPTIONS }>>["values"] {
  try {
    const { values } = parseArgs({ options: OPTIONS });
    for (const name of [
      "seed",
      "engine-poll-secs",
      "poll-phase-ms",
      "poll-sweep",
      "queue-weight",
      "request-chars",
      "eviction-weight",
      "cache-load-bound",
    ] as const) {
      const value = values[name];
      if (value !== undefined && !(Number(value) >= 0)) {
        throw new Error(`--${name} must be a number ≥ 0, got "${value}"`);
      }
    }
    if (!(WORKLOADS as readonly string[]).includes(values.workload)) {
      throw new Error(`--workload must be one of ${WORKLOADS.join(", ")}`);
    }
    for (const p of values.policies.split(",")) {
      if (!isPolicyName(p)) throw new Error(`--policies: unknown policy "${p}"`);
    }
    return values;
  } catch (err) {
    console.error(`bench:ttft: ${(err as Error).message}\n${USAGE}`);
    process.exit(2);
  }
}

const OPTIONS = {
  help: { type: "boolean", default: false },
  workload: { type: "string", default: "cache-pressure" },
  policies: { type: "string", default: "prefix_cost" },
  quick: { type: "boolean", default: false },
  seed: { type: "string" },
  "engine-poll-secs": { type: "string", default: "5" },
  "poll-phase-ms": { type: "string", default: "0" },
  "poll-sweep": { type: "string" },
  "foreign-against-now": { type: "boolean", default: false },
  "queue-weight": { type: "string" },
  "request-chars": { type: "string" },
  "eviction-weight": { type: "string" },
  "tie-break": { type: "string" },
  "cache-load-bound": { type: "string" },
  "kv-events": { type: "boolean", default: false },
} as const;

async function main(): Promise<void> {
  const values = parseCli();
  if (values.help) {
    console.log(USAGE);
    return;
  }
  const chosen = values.quick ? QUICK_PRESET : FULL_PRESET;
  const preset = values.seed === undefined ? chosen : { ...chosen, seed: Number(values.seed) };
  const name = values.workload as WorkloadName;
  if (!WORKLOADS.includes(name)) throw new Error(`--workload must be one of ${WORKLOADS}`);
  const policies = values.policies.split(",").map((p) => {
    if (!isPolicyName(p)) throw new Error(`--policies: unknown policy ${p}`);
    return p as PolicyName;
  });
  const options = {
    ...(values["queue-weight"] === undefined
      ? {}
      : { prefixCostQueueWeight: Number(values["queue-weight"]) }),
    ...(values["request-chars"] === undefined
      ? {}
      : { prefixCostRequestChars: Number(values["request-chars"]) }),
    ...(values["eviction-weight"] === undefined
      ? {}
      : { prefixCostEvictionWeight: Number(values["eviction-weight"]) }),
    ...(values["tie-break"] === undefined
      ? {}
      : { prefixCostTieBreak: values["tie-break"] as TieBreak }),
    ...(values["cache-load-bound"] === undefined
      ? {}
      : { cacheLoadBound: Number(values["cache-load-bound"]) }),
  };
  const w = prepareWorkload(name, preset);
  // The router polls its engines every --engine-poll-interval-secs of real time (default 5).
  const pollSecs = Number(values["engine-poll-secs"]);
  const enginePollMs = preset.timeScale > 0 ? (pollSecs * 1000) / preset.timeScale : 0;
  const base = {
    workers: preset.workers,
    concurrency: w.concurrency ?? preset.concurrency,
    enginePollMs,
    enginePollPhaseMs: Number(values["poll-phase-ms"]),
    foreignAgainstNow: values["foreign-against-now"],
  };
  if (values["poll-sweep"] !== undefined) {
    await pollSweep(w, base, policies, options, Number(values["poll-sweep"]));
    return;
  }
  const rows: [string, ReplayResult][] = [];
  for (const policy of policies) {
    if (!values["kv-events"]) {
      const chooser = { kind: "policy" as const, policy: createPolicy(policy, options) };
      rows.push([policy, await replay(w, { ...base, chooser })]);
      continue;
    }
    // Over the engines' events: their tiers credited (the default weights), then the GPU alone.
    for (const [label, weights] of [
      ["", DEFAULT_TIER_WEIGHTS],
      [":tier-blind", "gpu=1,cpu=0,disk=0"],
    ] as const) {
      const chooser = {
        kind: "precise" as const,
        policy: createPolicy(policy, options),
        tierWeights: parseTierWeights(weights),
      };
      rows.push([`${policy}/precise${label}`, await replay(w, { ...base, chooser })]);
    }
  }
  const oracle = w.oracle;
  if (oracle !== undefined) {
    rows.push([
      "oracle",
      await replay(w, { ...base, chooser: { kind: "pinned", workerOf: oracle } }),
    ]);
  }
  console.log(`## ${name} (${preset.name} preset), model ms; real ≈ model × ${preset.timeScale}`);
  printTable(
    [
      "row",
      "hit",
      "TTFT",
      "real",
      "wait",
      "own",
      "others",
      "rest",
      "alone",
      "start",
      "steady",
      "per worker",
    ],
    rows.map(([row, r]) => {
      const { start, steady } = splitAtStart(r, base.concurrency);
      return [
        row,
        `${(r.hitRate * 100).toFixed(1)}%`,
        fmt(meanOf(r.requests, "ttft")),
        fmt(meanOf(r.requests, "ttft") * preset.timeScale),
        fmt(meanOf(r.requests, "wait")),
        fmt(meanOf(r.requests, "own")),
        fmt(meanOf(r.requests, "others")),
        fmt(meanOf(r.requests, "rest")),
        fmt(meanOf(r.requests, "alone")),
        fmt(startShare(start, r.requests.length)),
        fmt(meanOf(steady, "ttft")),
        r.perWorker.join("/"),
      ];
    }),
  );
  console.log("\nby kind: requests, mean TTFT (wait / own / others / rest)");
  printTable(
    ["row", ...KINDS],
    rows.map(([row, r]) => [
      row,
      ...KINDS.map((k) => {
        const of = r.requests.filter((x) => kindOf(x) === k);
        return `${of.length}: ${fmt(meanOf(of, "ttft"))} (${fmt(meanOf(of, "wait"))}/${fmt(meanOf(of, "own"))}/${fmt(meanOf(of, "others"))}/${fmt(meanOf(of, "rest"))})`;
      }),
    ]),
  );
  if (values["kv-events"]) {
    // The offload target, in model time: crediting the tiers against the GPU cache alone.
    for (const policy of policies) {
      const aware = rows.find(([row]) => row === `${policy}/precise`)![1];
      const blind = rows.find(([row]) => row === `${policy}/precise:tier-blind`)![1];
      const ratio = meanOf(aware.requests, "ttft") / meanOf(blind.requests, "ttft");
      console.log(
        `goal (${policy}): tier-aware mean TTFT ≤ 0.85× tier-blind, model time: ${fmt(ratio, 2)}× (hit rate ${(aware.hitRate * 100).toFixed(1)}% vs ${(blind.hitRate * 100).toFixed(1)}%) → ${ratio <= 0.85 ? "met" : "MISSED"}`,
      );
    }
  }
  if (oracle !== undefined) {
    const reference = new Map(rows.at(-1)![1].requests.map((x) => [x.spec.id, x]));
    console.log("\nagainst the oracle, request by request: Σ difference / requests (model ms)");
    printTable(
      ["row", ...COMPONENTS, "on oracle's worker", "tenant split"],
      rows.slice(0, -1).map(([row, r]) => {
        const diff = (key: (typeof COMPONENTS)[number]) =>
          fmt(mean(r.requests.map((x) => x[key] - reference.get(x.spec.id)![key])));
        const same = r.requests.filter((x) => x.worker === reference.get(x.spec.id)!.worker);
        const tenants = new Map<number, Set<number>>();
        for (const x of r.requests) {
          const set = tenants.get(x.spec.group ?? 0) ?? new Set<number>();
          set.add(x.worker);
          tenants.set(x.spec.group ?? 0, set);
        }
        const split = [...tenants.values()].filter((s) => s.size > 1).length;
        return [
          row,
          ...COMPONENTS.map(diff),
          `${same.length}/${r.requests.length}`,
          `${split}/${tenants.size}`,
        ];
      }),
    );
  }
}

/**
 * The engine poll's timing decides which requests see a queue reading, so each policy is replayed
 * with the poll timer at `phases` evenly spaced phases, counting the foreign queue against the
 * router's pending requests at the read (today) and against its pending requests now (before).
 */
async function pollSweep(
  w: ReturnType<typeof prepareWorkload>,
  base: { workers: number; concurrency: number; enginePollMs: number },
  policies: readonly PolicyName[],
  options: PolicyOptions,
  phases: number,
): Promise<void> {
  const oracle = w.oracle;
  if (oracle === undefined) throw new Error("--poll-sweep needs a workload with an oracle");
  const reference = meanOf(
    (await replay(w, { ...base, chooser: { kind: "pinned", workerOf: oracle } })).requests,
    "ttft",
  );
  console.log(
    `## ${w.name}: poll every ${fmt(base.enginePollMs, 0)} model ms, ${phases} phases; oracle ${fmt(reference)} model ms`,
  );
  const rows: (string | number)[][] = [];
  for (const policy of policies) {
    for (const againstNow of [true, false]) {
      const ratios: number[] = [];
      const hits: number[] = [];
      for (let i = 0; i < phases; i++) {
        const r = await replay(w, {
          ...base,
          chooser: { kind: "policy", policy: createPolicy(policy, options) },
          enginePollPhaseMs: (i * base.enginePollMs) / phases,
          foreignAgainstNow: againstNow,
        });
        ratios.push(meanOf(r.requests, "ttft") / reference);
        hits.push(r.hitRate);
      }
      rows.push([
        policy,
        againstNow ? "pending now (before)" : "pending at the read",
        fmt(mean(ratios), 3),
        fmt(Math.min(...ratios), 3),
        fmt(Math.max(...ratios), 3),
        `${(mean(hits) * 100).toFixed(2)}%`,
        `${(Math.min(...hits) * 100).toFixed(1)}%`,
      ]);
    }
  }
  printTable(
    [
      "policy",
      "foreign queue against",
      "TTFT / oracle mean",
      "best",
      "worst",
      "hit mean",
      "hit worst",
    ],
    rows,
  );
}

runIfEntryPoint(import.meta.url, main);
