/**
 * Row variants of bench:routing: a router row with one or more sources of run-to-run variance
 * switched off or frozen (issue 27), named `<row>:<knob>+<knob>`, e.g. `prefix_cost:poll-frozen`.
 * Each variant runs interleaved with the plain row in the same repeats, so load on the machine
 * falls on both alike.
 */

import { CHARS_PER_TOKEN } from "../../sim/tokenizer.js";
import type { ConfigOverrides } from "../../src/config.js";
import { SUGGESTED_CHURN_HALF_LIFE } from "../../src/scheduling/options.js";
import type { RunningRouter } from "../../src/server.js";
import { SUGGESTED_RANK_HOLD_MS } from "../../src/state/settings.js";

/**
 * - `poll-frozen`: the engines are read once, when the router starts, and never again: queue and
 *   load stay at that first reading, the tree budgets at capacity × the starting 4 characters per
 *   token (they are re-evaluated only after a read).
 * - `budget-fixed`: the tree budgets fixed at the engines' capacity × the simulator's characters
 *   per token (--max-tree-size), so the learned characters per token never move them; polls go on.
 * - `tree-unbounded`: the trees never evict (--max-tree-size 2^26): only the engines forget.
 * - `no-feedback`: cached-token feedback never trims a tree (Scheduler.reported does nothing).
 * - `no-inflight`: prefix_cost without its in-flight term (--prefix-cost-request-chars 0).
 * - `no-queue`: prefix_cost without its pending-prefill term (--prefix-cost-queue-weight 0).
 * - `no-eviction`: prefix_cost without its eviction term (--prefix-cost-eviction-weight 0).
 * - `rotation`, `hash`: prefix_cost's tie-break (--prefix-cost-tie-break).
 * - `churn`: prefix_cost places new prefixes by churn, not at the lowest cost
 *   (--prefix-cost-churn-half-life 1024).
 * - `tier-blind`: the precise index credits the GPU cache alone (--kv-tier-weights cpu=0,disk=0):
 *   blocks the engines offloaded to a CPU or storage tier count for nothing.
 * - `rank-hold`: replicas hold a decision that places a prefix by their rank (--state-rank-hold-ms
 *   2); with --replicas.
 * - `relay`: each replica advertises the URL it listens on (--state-advertise-url) and relays new
 *   prefixes whole to the leader (--state-relay new-prefixes, proxy/leader-relay.ts); with --replicas N
 *   --shared-state, real time only (the replay models it as `leader-new`).
 * - `relay-all`: as `relay`, with every request relayed to the leader (--state-relay all), so the
 *   leader decides, admits and serves them all; real time only.
 * - `relay-decisions`: as `relay`, with the leader deciding, admitting and counting every request
 *   while the replica that got it carries its bytes to the worker (--state-relay decisions).
 * - `slow-load`: replicas publish and read their in-flight counts every 250 ms
 *   (--state-load-interval-ms 250), the default before 50 ms (10 and 25 measured no better than 50).
 * - `leader`, `leader-new`, `tenant-owner`, `text-owner`: with --replay --replicas, another replica
 *   decides (bench/lib/ttft-replay.ts ReplicaDecider): a model only, no router setting.
 * - `leader-built`: the one decider of new prefixes as it was built in the router, in the replay;
 *   `own-tree`, `leader-records`, `ask-each`, `leader-counts` each switch one of its ways to
 *   leader-new's (ttft-replay.ts BuiltLeaderSwitches).
 */
/** Knobs of the replay's replica model that no router setting has. */
const MODEL_ONLY = [
  "leader",
  "leader-new",
  "leader-built",
  "own-tree",
  "leader-records",
  "ask-each",
  "leader-counts",
  "tenant-owner",
  "text-owner",
] as const;

export const ROW_KNOBS = [
  "poll-frozen",
  "budget-fixed",
  "tree-unbounded",
  "no-feedback",
  "no-inflight",
  "no-queue",
  "no-eviction",
  "rotation",
  "hash",
  "churn",
  "tier-blind",
  "rank-hold",
  "relay",
  "relay-all",
  "relay-decisions",
  "slow-load",
  ...MODEL_ONLY,
] as const;
export type RowKnob = (typeof ROW_KNOBS)[number];

const MODEL_ONLY_KNOBS: readonly RowKnob[] = MODEL_ONLY;

/** A row label split into its base row and its knobs (none for a plain row). */
export function parseRowLabel(label: string): { base: string; knobs: RowKnob[] } {
  const colon = label.indexOf(":");
  if (colon < 0) return { base: label, knobs: [] };
  const knobs = label
    .slice(colon + 1)
    .split("+")
    .map((k) => {
      if (!(ROW_KNOBS as readonly string[]).includes(k)) {
        throw new Error(`unknown row knob "${k}" in "${label}"; expected ${ROW_KNOBS.join(", ")}`);
      }
      return k as RowKnob;
    });
  return { base: label.slice(0, colon), knobs };
}

/** Router settings a variant changes, for a fleet whose engines hold `kvCapacityTokens` each. */
export function knobOverrides(
  knobs: readonly RowKnob[],
  kvCapacityTokens: number,
): ConfigOverrides {
  const o: ConfigOverrides = {};
  for (const knob of knobs) {
    if (MODEL_ONLY_KNOBS.includes(knob))
      throw new Error(`row knob "${knob}" is a model of the replay only: add --replay`);
    if (knob === "budget-fixed") o.maxTreeSize = kvCapacityTokens * CHARS_PER_TOKEN;
    if (knob === "tree-unbounded") o.maxTreeSize = 2 ** 26;
    if (knob === "no-inflight") o.prefixCostRequestChars = 0;
    if (knob === "no-queue") o.prefixCostQueueWeight = 0;
    if (knob === "no-eviction") o.prefixCostEvictionWeight = 0;
    if (knob === "rotation" || knob === "hash") o.prefixCostTieBreak = knob;
    if (knob === "churn") o.prefixCostChurnHalfLife = SUGGESTED_CHURN_HALF_LIFE;
    if (knob === "tier-blind") o.kvTierWeights = "gpu=1,cpu=0,disk=0";
    if (knob === "rank-hold") o.stateRankHoldMs = SUGGESTED_RANK_HOLD_MS;
    if (knob === "slow-load") o.stateLoadIntervalMs = 250;
    if (knob === "relay") o.stateRelay = "new-prefixes";
    if (knob === "relay-all") o.stateRelay = "all";
    if (knob === "relay-decisions") o.stateRelay = "decisions";
  }
  return o;
}

/**
 * What a variant changes in a started router, beyond its settings. Reaches into the router's
 * context: no production path needs these switches.
 */
export function applyKnobs(router: RunningRouter, knobs: readonly RowKnob[]): void {
  if (knobs.includes("poll-frozen")) router.context.introspection.stop();
  if (knobs.includes("no-feedback")) router.context.decider.reported = () => 0;
  // Replicas listen on port 0: the URL is known only now.
  if (relaysToLeader(knobs)) router.context.sharedState?.advertise(router.url);
}

/** The row's replicas relay to the leader (knob `relay`, `relay-all`, `relay-decisions`): real replicas only. */
export function relaysToLeader(knobs: readonly RowKnob[]): boolean {
  return (
    knobs.includes("relay") || knobs.includes("relay-all") || knobs.includes("relay-decisions")
  );
}
