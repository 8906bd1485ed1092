/**
 * The engine's floor under bench:admission's flood (issue 24): the time to first token a light
 * request gets when the router adds nothing — released the moment it arrives, never held — in a
 * deterministic model-time replay of the simulator's engine (sim/engine.ts on a virtual clock; no
 * HTTP, no CPU noise). What a router can still win lies above this floor; what lies below it
 * belongs to the engine's steps.
 *
 *   npm run bench:admission-floor
 *   npm run bench:admission-floor -- --seconds 600 --batch-tokens 8192,2048,512,256 --flood-spread 0.5
 *   npm run bench:admission-floor -- --engine sglang     SGLang's prefill-first steps (default: vLLM's mixed)
 *   npm run bench:admission-floor -- --engine sglang --batch-tokens 2048 --seconds 300 --flood-start burst --arrivals bench
 *       the fleet's flood begun all at once and the light requests sent as bench:admission sends them
 *
 * One engine with bench:admission's shapes: a running batch of 8, the flood's requests 1,000
 * prompt tokens and 96 output (bench:admission's 4,000 characters at the simulator's 4 per token),
 * the light ones 100 and 16, light arrivals at random (Poisson, 3 per second: bench:admission's
 * B-D, 6 per second over two engines). The flood is an ideal admission queue: each of its
 * requests is submitted the moment one of its own ends, so the engine always holds `slots` of them
 * and never queues one (the lanes start staggered, so their ends are spread out). Rows, for each chunked-prefill budget (the engine's tokens per step:
 * SGLang --chunked-prefill-size, vLLM --max-num-batched-tokens; sim option maxBatchTokens):
 *
 *   quiet        the light requests alone (their unloaded TTFT)
 *   fcfs         the flood in all 8 slots, first come first served: a light request waits in the
 *                engine's queue for a slot (what a router that never holds it gives)
 *   reserve-1    the flood in 7 slots, one kept free: a light request starts at the next step
 *   preempt      the flood in all 8 slots at a lower priority, the engine preempting for a light
 *                request (priority scheduling, as with --engine-priority): SGLang with
 *                --enable-priority-scheduling --priority-scheduling-preemption-threshold 0, the
 *                most favourable engine. With SGLang's default threshold (10) a gap of 1 preempts
 *                nothing, and vLLM's v1 scheduler never preempts for a waiting request
 *                (docs/simulator.md): those engines give the fcfs row's queueing, reordered.
 *
 * For each: light TTFT p50/p99 (model ms), p99 ÷ quiet p99, and the flood's output tokens per
 * second ÷ the fcfs row's (what keeping a slot free or preempting costs the flood).
 *
 * Then the same on 2 engines with the router's rules (runFleet): slots kept (Keep: none, one, two,
 * or a second one only at times), preemption, the flood paced or let into the engines' queues,
 * and where a preempting light request goes (the roomiest engine, the least prefill sent there,
 * or the least still under way: Placement); with how many light requests the router held and
 * their wait's p99. Every row sees the same light arrivals (drawn apart from the prompts).
 */
import { parseArgs } from "node:util";
import { Engine } from "../sim/engine.js";
import { PrefixKvCache } from "../sim/kv-cache.js";
import { ManualClock } from "../sim/manual-clock.js";
import { exponential, mulberry32, type Rng } from "../sim/prng.js";
import { DEFAULT_TIMING } from "../sim/timing.js";
import { runIfEntryPoint } from "./lib/entry.js";
import { fmt } from "./lib/latency.js";
import { printTable } from "./lib/stats.js";

const MAX_RUNNING = 8;
const FLOOD = { promptTokens: 1000, maxTokens: 96 };
const LIGHT = { promptTokens: 100, maxTokens: 16 };
/** Light requests per model second on one engine (bench:admission: 3 tenants × 2/s over 2 engines). */
const LIGHT_RATE = 3;

/** SGLang's --priority-scheduling-preemption-threshold by default. */
const PREEMPTION_THRESHOLD = 10;

/** The simulated engine's prefill speed, tokens a model ms. */
const PREFILL_TOKENS_PER_MS = DEFAULT_TIMING.prefillTokensPerSec / 1000;

/**
 * Where the fleet's light request goes: the engine holding the fewest requests (`roomiest`), the
 * least prefill the router sent there and has no first token for (`sent`: prefix_cost's queue
 * term), or the least of that still under way (`under-way`: less what the engine computed since
 * the oldest was sent, at its prefill speed). A light request preempting the flood is served
 * before everything that waits, so only the prefill under way is ahead of it; the router could
 * estimate that from its own dispatches and first bytes.
 */
type Placement = "roomiest" | "sent" | "under-way";

type Mode = "quiet" | "fcfs" | "reserve-1" | "preempt";
const MODES: readonly Mode[] = ["quiet", "fcfs", "reserve-1", "preempt"];

interface RunResult {
  mode: Mode;
  batchTokens: number;
  ttfts: number[];
  floodTokensPerSec: number;
}

/** Distinct token ids, so no request finds another's prefix in the cache. */
function freshPrompt(rng: Rng, length: number): number[] {
  const tokens = new Array<number>(length);
  for (let i = 0; i < length; i++) tokens[i] = 100 + Math.floor(rng() * 30_000);
  return tokens;
}

function runOnce(
  mode: Mode,
  batchTokens: number,
  seconds: number,
  seed: number,
  spread: number,
  /** SGLang's step rule: a step with prefill runs it alone (sim/engine.ts prefillFirst). */
  prefillFirst: boolean,
): RunResult {
  const clock = new ManualClock();
  const rng = mulberry32(seed);
  // Arrivals drawn apart from the prompts, so every row sees the same light requests.
  const arrivalRng = mulberry32(seed + 1);
  const engine = new Engine(
    {
      timing: DEFAULT_TIMING,
      maxRunning: MAX_RUNNING,
      maxBatchTokens: batchTokens,
      delayFactor: () => 1,
      prefillFirst,
      // SGLang's direction (higher first), the flood at -1, light at 0, preempting for any gap.
      ...(mode === "preempt"
        ? { priorityOrder: "higher-first" as const, preemptionThreshold: 0 }
        : {}),
    },
    new PrefixKvCache({ capacityTokens: 400_000, blockSize: 16 }),
    clock,
  );
  const endAt = seconds * 1000;
  let floodTokens = 0;
  const submitFlood = () => {
    if (clock.now() >= endAt) return;
    engine.submit({
      promptTokens: freshPrompt(rng, FLOOD.promptTokens),
      // --flood-spread s: output lengths uniform in 96 × [1 − s, 1 + s] (0: every one 96 long).
      maxTokens: Math.max(1, Math.round(FLOOD.maxTokens * (1 + spread * (2 * rng() - 1)))),
      priority: -1,
      sink: {
        onToken: () => {
          if (clock.now() <= endAt) floodTokens++;
        },
        onFinish: submitFlood,
      },
    });
  };
  const floodSlots = mode === "quiet" ? 0 : mode === "reserve-1" ? MAX_RUNNING - 1 : MAX_RUNNING;
  // Staggered over about one flood request's life (≈ 0.9 model s), so the lanes' ends spread out
  // instead of freeing every slot in one burst: the most favourable spacing for a light request.
  for (let i = 0; i < floodSlots; i++) clock.setTimer(submitFlood, (i * 900) / floodSlots);

  const ttfts: number[] = [];
  const submitLight = () => {
    const sent = clock.now();
    engine.submit({
      promptTokens: freshPrompt(rng, LIGHT.promptTokens),
      maxTokens: LIGHT.maxTokens,
      priority: 0,
      sink: {
        onToken: (index) => {
          if (index === 0) ttfts.push(clock.now() - sent);
        },
        onFinish: () => {},
      },
    });
  };
  // Light arrivals, Poisson, from the second model second on (the flood's start settles first).
  let at = 1000;
  const scheduleLight = () => {
    at += exponential(arrivalRng, 1000 / LIGHT_RATE);
    if (at >= endAt) return;
    clock.setTimer(() => {
      submitLight();
      scheduleLight();
    }, at - clock.now());
  };
  scheduleLight();
  while (clock.now() < endAt && clock.fireNext()) {
    // fireNext moves the clock to the next timer and runs it.
  }
  engine.stop();
  return { mode, batchTokens, ttfts, floodTokensPerSec: floodTokens / seconds };
}

/**
 * What the router keeps free for the light requests beyond their own requests in flight
 * (--tenant-reserve-slots' rule), in model time:
 *
 *   number          that many free slots, always (0: none; 1: the router's reserve before)
 *   "light-plus-1"  one free beyond the light requests' in flight, 2 kept at most (the light
 *                   requests' own slots count as kept): 1 free for none or one in flight, 0 for two
 *   "idle-2"        2 free while no light request is in flight, 1 while one is: the slot a light
 *                   request takes is refilled only after it ends, not at the next flood end
 *   "after-start"   2 free for a light inter-arrival time (a running mean of the gaps) after a light
 *                   request started, 1 after that
 */
type Keep = number | "light-plus-1" | "idle-2" | "after-start";

/** How a light request arrives: at random (Poisson), or bench:admission's three evenly spaced tenants. */
type Arrivals = "poisson" | "bench";

/**
 * How the fleet's flood begins: its lanes staggered over one request's life (its ends spread
 * out, the most favourable spacing), or all at once, as bench:admission's backlog at 3× capacity
 * fills every slot in its first milliseconds (requests that start in one step end in one step,
 * so the ends come in bursts from then on, unless something spreads them).
 */
type FloodStart = "staggered" | "burst";

interface FleetRule {
  /** Free slots kept for the light requests. */
  keep: Keep;
  /**
   * The engines schedule by priority and preempt past SGLang's default threshold (10), the flood
   * reaches them 11 below the light requests (--engine-priority's demotion of a tenant over its
   * share), and a light request that finds no free slot goes at once instead of being held: the
   * engine preempts the flood's latest request for it at its next step.
   */
  preempt?: boolean;
  /**
   * A light request that finds no free slot goes into the engine queue of the worker holding
   * the fewest (--saturation-queue-depth 1: one queued request each still counts as room)
   * instead of being held for the fleet's next free slot.
   */
  queueAtEngine?: boolean;
  /**
   * The flood is let go to an engine only while no request there waits for its first token (in
   * the engine's queue or its prefill; the router's rule for a yielding tenant, admission-queue.ts
   * prefillIdle) and it has a free slot (beyond its batch only by floodDepth): one flood prompt in
   * prefill per engine at a time, begun when it was sent, so a light request never finds a run of
   * the flood's prefill steps ahead of it, nor one joining its own step.
   */
  pace?: boolean;
  /**
   * The flood may also wait in each engine's queue, up to this many requests there
   * (--saturation-queue-depth N while no slot is kept: a tenant alone, or one band over another,
   * the router holds a worker's work at its batch plus N); 0 = only into free slots.
   */
  floodDepth?: number;
  /** Where a light request goes (Placement). */
  placement?: Placement;
}

/**
 * The router's rule on a fleet (--tenant-reserve-slots, src/admission/tenant-share.ts) in model
 * time: `engines` engines of MAX_RUNNING, the flood always backlogged in the router (an ideal
 * admission queue), the light requests (LIGHT_RATE per engine) let go at once into a free slot,
 * else held until one frees (before the flood). The flood refills a slot only while more than
 * the rule's kept slots are free (rule.keep). Dispatch takes no time (the router's round trip is
 * not modelled).
 */
function runFleet(
  engines: number,
  batchTokens: number,
  seconds: number,
  seed: number,
  prefillFirst: boolean,
  rule: FleetRule,
  arrivals: Arrivals = "poisson",
  floodStart: FloodStart = "staggered",
): { ttfts: number[]; waits: number[]; floodTokensPerSec: number } {
  const { keep, preempt = false, queueAtEngine = false, pace = false } = rule;
  const floodDepth = rule.floodDepth ?? 0;
  const placement = rule.placement ?? "roomiest";
  const clock = new ManualClock();
  const rng = mulberry32(seed);
  // Arrivals drawn apart from the prompts, so every row sees the same light requests.
  const arrivalRng = mulberry32(seed + 1);
  const fleet = Array.from({ length: engines }, () => ({
    held: 0,
    /** Every request there without a first token yet: its prompt tokens and when it was sent. */
    pending: [] as { tokens: number; sentAt: number }[],
    engine: new Engine(
      {
        timing: DEFAULT_TIMING,
        maxRunning: MAX_RUNNING,
        maxBatchTokens: batchTokens,
        delayFactor: () => 1,
        prefillFirst,
        ...(preempt
          ? { priorityOrder: "higher-first" as const, preemptionThreshold: PREEMPTION_THRESHOLD }
          : {}),
      },
      new PrefixKvCache({ capacityTokens: 400_000, blockSize: 16 }),
      clock,
    ),
  }));
  const endAt = seconds * 1000;
  const slots = engines * MAX_RUNNING;
  let floodTokens = 0;
  const ttfts: number[] = [];
  /** How long each light request the router held waited for a slot. */
  const waits: number[] = [];
  const waitingLight: number[] = [];
  let lightInFlight = 0;
  let lastLightStart = Number.NEGATIVE_INFINITY;
  let lastLightArrival = Number.NaN;
  /** A running mean of the light requests' inter-arrival gaps (model ms). */
  let lightGap = 1000 / (LIGHT_RATE * engines);
  const keptFree = (): number => {
    if (typeof keep === "number") return keep;
    if (keep === "light-plus-1") return Math.max(0, Math.min(2, lightInFlight + 1) - lightInFlight);
    if (keep === "idle-2") return lightInFlight === 0 ? 2 : 1;
    return clock.now() - lastLightStart < lightGap ? 2 : 1;
  };
  const freeTotal = () => slots - fleet.reduce((n, e) => n + e.held, 0);
  const roomiest = () => fleet.reduce((a, b) => (b.held < a.held ? b : a));
  type Member = (typeof fleet)[number];
  const sent = (e: Member) => e.pending.reduce((sum, p) => sum + p.tokens, 0);
  // What was sent there, less what the engine computed since the oldest was sent.
  const underWay = (e: Member) =>
    e.pending.length === 0
      ? 0
      : Math.max(0, sent(e) - PREFILL_TOKENS_PER_MS * (clock.now() - (e.pending[0]?.sentAt ?? 0)));
  /** A light request's engine by `placement`: the least work by the key, then the roomiest. */
  const lightTarget = (): Member => {
    if (placement === "roomiest") return roomiest();
    const key = placement === "sent" ? sent : underWay;
    return fleet.reduce((a, b) =>
      key(b) < key(a) || (key(b) === key(a) && b.held < a.held) ? b : a,
    );
  };
  /** Where the flood may go now: the roomiest engine, paced or not; undefined when paced out. */
  const floodTarget = () => {
    if (!pace && floodDepth === 0) return roomiest();
    const open = fleet.filter(
      (e) =>
        (!pace || (e.pending.length === 0 && e.held < MAX_RUNNING + floodDepth)) &&
        (floodDepth === 0 || e.held < MAX_RUNNING + floodDepth),
    );
    return open.length === 0 ? undefined : open.reduce((a, b) => (b.held < a.held ? b : a));
  };
  /** Whether the flood may go on now: beyond the kept slots, or (floodDepth) within the engines' queues. */
  const floodRoom = () =>
    floodDepth === 0
      ? freeTotal() > keptFree()
      : fleet.some((e) => e.held < MAX_RUNNING + floodDepth);
  const submit = (
    shape: typeof FLOOD,
    onToken: (i: number) => void,
    onEnd: () => void,
    at = roomiest(),
  ) => {
    at.held += 1;
    const mark = { tokens: shape.promptTokens, sentAt: clock.now() };
    at.pending.push(mark);
    const firstToken = (i: number) => {
      if (i === 0) at.pending.splice(at.pending.indexOf(mark), 1);
      onToken(i);
    };
    at.engine.submit({
      promptTokens: freshPrompt(rng, shape.promptTokens),
      maxTokens: shape.maxTokens,
      priority: shape === FLOOD ? -(PREEMPTION_THRESHOLD + 1) : 0,
      sink: {
        onToken: firstToken,
        onFinish: () => {
          at.held -= 1;
          onEnd();
        },
      },
    });
  };
  const startLight = (sentAt: number) => {
    if (clock.now() > sentAt) waits.push(clock.now() - sentAt);
    lightInFlight += 1;
    lastLightStart = clock.now();
    // A kept slot held only for a while is handed back to the flood when the while ends.
    if (keep === "after-start") clock.setTimer(refill, lightGap);
    submit(
      LIGHT,
      (i) => {
        if (i === 0) ttfts.push(clock.now() - sentAt);
      },
      () => {
        lightInFlight -= 1;
        refill();
      },
      lightTarget(),
    );
  };
  const submitFlood = () => {
    const at = floodTarget();
    if (at === undefined) return false;
    submit(
      FLOOD,
      (i) => {
        if (clock.now() <= endAt) floodTokens++;
        if (i === 0 && pace) refill();
      },
      refill,
      at,
    );
    return true;
  };
  // A freed slot goes to a held light request first, then to the flood beyond the kept slots.
  function refill(): void {
    while (waitingLight.length > 0 && freeTotal() > 0) startLight(waitingLight.shift() as number);
    while (clock.now() < endAt && floodRoom()) {
      if (!submitFlood()) return;
    }
  }
  // The flood's first lanes staggered over one request's life, as runOnce's, or all at once.
  const lanes = slots - (typeof keep === "number" ? keep : 1) + engines * floodDepth;
  const spacing = floodStart === "staggered" ? 900 / (slots + engines * floodDepth) : 0;
  for (let i = 0; i < lanes; i++)
    clock.setTimer(() => {
      if (floodRoom()) submitFlood();
    }, i * spacing);
  const arrive = () => {
    const now = clock.now();
    if (!Number.isNaN(lastLightArrival)) lightGap += (now - lastLightArrival - lightGap) / 8;
    lastLightArrival = now;
    const engineRoom = queueAtEngine && roomiest().held < MAX_RUNNING + 1;
    if (freeTotal() > 0 || preempt || engineRoom) startLight(now);
    else waitingLight.push(now);
  };
  if (arrivals === "poisson") {
    let at = 1000;
    const scheduleLight = () => {
      at += exponential(arrivalRng, 1000 / (LIGHT_RATE * engines));
      if (at >= endAt) return;
      clock.setTimer(() => {
        arrive();
        scheduleLight();
      }, at - clock.now());
    };
    scheduleLight();
  } else {
    // bench:admission's light load: LIGHT_RATE × engines ÷ 3 a second from each of three
    // tenants, evenly spaced, the tenants 97 ms apart (bench/admission.ts lightLoad).
    const gap = (1000 * 3) / (LIGHT_RATE * engines);
    for (let tenant = 0; tenant < 3; tenant++) {
      for (let at = 1000 + tenant * 97; at < endAt; at += gap) clock.setTimer(arrive, at);
    }
  }
  while (clock.now() < endAt && clock.fireNext()) {
    // fireNext moves the clock to the next timer and runs it.
  }
  for (const e of fleet) e.engine.stop();
  return { ttfts, waits, floodTokensPerSec: floodTokens / seconds };
}

function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  const i = Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1);
  return sorted[Math.max(0, i)] as number;
}

export async function main(argv = process.argv.slice(2)): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      seconds: { type: "string", default: "600" },
      "batch-tokens": { type: "string", default: "8192,2048,512,256" },
      seed: { type: "string", default: "24" },
      "flood-spread": { type: "string", default: "0" },
      engine: { type: "string", default: "vllm" },
      arrivals: { type: "string", default: "poisson" },
      "flood-start": { type: "string", default: "staggered" },
    },
  });
  const seconds = Number(values.seconds);
  const seed = Number(values.seed);
  const spread = Number(values["flood-spread"]);
  const budgets = String(values["batch-tokens"]).split(",").map(Number);
  const engineRules = values.engine;
  const arrivals = values.arrivals;
  if (arrivals !== "poisson" && arrivals !== "bench") {
    throw new Error(`--arrivals must be poisson or bench, got ${arrivals}`);
  }
  const floodStart = values["flood-start"];
  if (floodStart !== "staggered" && floodStart !== "burst") {
    throw new Error(`--flood-start must be staggered or burst, got ${floodStart}`);
  }
  if (engineRules !== "sglang" && engineRules !== "vllm") {
    throw new Error(`--engine must be sglang or vllm, got ${engineRules}`);
  }
  if (
    !(seconds > 1) ||
    budgets.some((b) => !Number.isInteger(b) || b < 1) ||
    !(spread >= 0 && spread < 1)
  ) {
    throw new Error(
      "--seconds must be > 1, --batch-tokens positive integers, --flood-spread in [0, 1)",
    );
  }
  console.log(
    `engine floor under the flood: 1 engine (${engineRules} step rule), batch ${MAX_RUNNING}, ${seconds} model s, seed ${seed}, flood output spread ±${spread * 100}%; light ${LIGHT_RATE}/s`,
  );
  const rows: string[][] = [];
  for (const budget of budgets) {
    const results = MODES.map((mode) =>
      runOnce(mode, budget, seconds, seed, spread, engineRules === "sglang"),
    );
    const quietP99 = quantile(
      [...(results[0] as RunResult).ttfts].sort((a, b) => a - b),
      0.99,
    );
    const fcfsTokens = (results[1] as RunResult).floodTokensPerSec;
    for (const r of results) {
      const sorted = [...r.ttfts].sort((a, b) => a - b);
      const p99 = quantile(sorted, 0.99);
      rows.push([
        String(budget),
        r.mode,
        String(sorted.length),
        fmt(quantile(sorted, 0.5)),
        fmt(p99),
        fmt(sorted[sorted.length - 1] ?? Number.NaN),
        r.mode === "quiet" ? "1" : fmt(p99 / quietP99, 2),
        r.mode === "quiet" ? "" : fmt(r.floodTokensPerSec, 0),
        r.mode === "quiet" || r.mode === "fcfs" ? "" : fmt(r.floodTokensPerSec / fcfsTokens, 3),
      ]);
    }
  }
  printTable(
    [
      "batch tokens",
      "mode",
      "light n",
      "TTFT p50 ms",
      "TTFT p99 ms",
      "max ms",
      "p99 ÷ quiet",
      "flood tok/s",
      "÷ fcfs",
    ],
    rows,
  );
  // The fleet's rule: 2 engines, slots kept across both (--tenant-reserve-slots) against none.
  const fleetRules: readonly (readonly [string, FleetRule])[] = [
    ["reserve 0", { keep: 0 }],
    ["reserve 1", { keep: 1 }],
    ["reserve 1, else an engine's queue", { keep: 1, queueAtEngine: true }],
    ["reserve 2", { keep: 2 }],
    ["one beyond the light in flight, 2 kept at most", { keep: "light-plus-1" }],
    ["2 while no light in flight, else 1", { keep: "idle-2" }],
    ["2 for a light gap after a light start, else 1", { keep: "after-start" }],
    ["reserve 1, flood paced", { keep: 1, pace: true }],
    ["2 while no light in flight, else 1, flood paced", { keep: "idle-2", pace: true }],
    [
      "2 for a light gap after a light start, else 1, flood paced",
      { keep: "after-start", pace: true },
    ],
    ["reserve 0, preempt", { keep: 0, preempt: true }],
    ["reserve 1, preempt", { keep: 1, preempt: true }],
    ["reserve 0, preempt, flood paced", { keep: 0, preempt: true, pace: true }],
    ["reserve 0, preempt, flood at depth 1", { keep: 0, preempt: true, floodDepth: 1 }],
    [
      "reserve 0, preempt, flood at depth 1, light by prefill sent",
      { keep: 0, preempt: true, floodDepth: 1, placement: "sent" },
    ],
    [
      "reserve 0, preempt, flood at depth 1, light by prefill under way",
      { keep: 0, preempt: true, floodDepth: 1, placement: "under-way" },
    ],
    [
      "reserve 0, preempt, flood paced at depth 1, light by prefill under way",
      { keep: 0, preempt: true, pace: true, floodDepth: 1, placement: "under-way" },
    ],
    [
      "reserve 0, preempt, flood paced, light by prefill sent",
      { keep: 0, preempt: true, pace: true, placement: "sent" },
    ],
    [
      "reserve 0, preempt, flood paced, light by prefill under way",
      { keep: 0, preempt: true, pace: true, placement: "under-way" },
    ],
  ];
  const fleetRows: string[][] = [];
  for (const budget of budgets) {
    const results = fleetRules.map(([, rule]) =>
      runFleet(2, budget, seconds, seed, engineRules === "sglang", rule, arrivals, floodStart),
    );
    const none = results[0];
    for (const [i, [name]] of fleetRules.entries()) {
      const r = results[i];
      const sorted = [...(r?.ttfts ?? [])].sort((a, b) => a - b);
      fleetRows.push([
        String(budget),
        name,
        String(sorted.length),
        fmt(quantile(sorted, 0.5)),
        fmt(quantile(sorted, 0.99)),
        String(r?.waits.length ?? 0),
        fmt(
          quantile(
            [...(r?.waits ?? [])].sort((a, b) => a - b),
            0.99,
          ),
        ),
        fmt(r?.floodTokensPerSec ?? Number.NaN, 0),
        fmt((r?.floodTokensPerSec ?? Number.NaN) / (none?.floodTokensPerSec ?? Number.NaN), 3),
      ]);
    }
  }
  console.log(
    `\nthe router's reserve on 2 engines (light let go into a free slot, else held for the next end; ${arrivals} arrivals, flood ${floodStart}):`,
  );
  printTable(
    [
      "batch tokens",
      "fleet",
      "light n",
      "TTFT p50 ms",
      "TTFT p99 ms",
      "held",
      "held p99 ms",
      "flood tok/s",
      "÷ reserve 0",
    ],
    fleetRows,
  );
}

runIfEntryPoint(import.meta.url, main);
