/**
 * A simulated engine's data-parallel ranks (vLLM --data-parallel-size, SGLang --dp-size): each
 * rank has its own KV cache, scheduler and KV-event publisher. As in the engines:
 * - rank r publishes on the rank-0 endpoints' ports + r (offset_endpoint_port in
 *   vllm/distributed/kv_events.py and sglang/srt/disaggregation/kv_events.py), and vLLM tags each
 *   batch with its rank;
 * - a request goes to the rank the client names, else to the least busy rank (the engines' own
 *   balancers). The OpenAI endpoints of both read the `X-data-parallel-rank` header (SGLang before
 *   the body's `routed_dp_rank`); SGLang's /generate reads only its body (`routed_dp_rank`, or
 *   the older `data_parallel_rank`: sglang/srt/entrypoints/http_server.py passes the parsed
 *   GenerateReqInput on as it is).
 */
import type { IncomingHttpHeaders } from "node:http";
import type { Clock } from "./clock.js";
import { Engine } from "./engine.js";
import type { GaugeRule } from "./engine-gauges.js";
import { PrefixKvCache } from "./kv-cache.js";
import { SimKvPublisher, type SimKvPublisherOptions } from "./kv-publisher.js";
import type { ResolvedSimOptions, SimFlavor } from "./options.js";
import { priorityOrderOf } from "./priority-order.js";

export interface SimRank {
  readonly kv: PrefixKvCache;
  readonly engine: Engine;
  /** Inference requests this rank served. */
  requests: number;
}

/** The rank the request names; undefined when it names none. Out of range: a client error. */
export function requestedRank(
  headers: IncomingHttpHeaders,
  body: unknown,
  ranks: number,
  read: { header: boolean; body: boolean },
): number | undefined | "invalid" {
  const header = read.header ? headers["x-data-parallel-rank"] : undefined;
  const fields = (read.body && typeof body === "object" && body !== null ? body : {}) as Record<
    string,
    unknown
  >;
  const raw =
    typeof header === "string"
      ? Number(header)
      : (fields.routed_dp_rank ?? fields.data_parallel_rank);
  if (raw === undefined || raw === null) return undefined;
  return typeof raw === "number" && Number.isInteger(raw) && raw >= 0 && raw < ranks
    ? raw
    : "invalid";
}

/** The least busy rank (running + waiting), the first on a tie. */
export function leastBusyRank(ranks: readonly SimRank[]): number {
  let best = 0;
  for (let r = 1; r < ranks.length; r++) {
    const busy = (x: SimRank) => x.engine.running + x.engine.waiting;
    if (busy(ranks[r]!) < busy(ranks[best]!)) best = r;
  }
  return best;
}

/**
 * One publisher per rank, on consecutive ports (rank 0 on free ones). Ports taken by something
 * else make it start over on other free ports, a few times.
 */
export async function bindRankPublishers(
  ranks: number,
  options: Omit<SimKvPublisherOptions, "dataParallelRank">,
  tagRank: boolean,
): Promise<SimKvPublisher[]> {
  let lastError: unknown;
  for (let attempt = 0; attempt < 20; attempt++) {
    const publishers: SimKvPublisher[] = [];
    try {
      for (let rank = 0; rank < ranks; rank++) {
        const publisher = new SimKvPublisher({
          ...options,
          ...(tagRank ? { dataParallelRank: rank } : {}),
        });
        publishers.push(publisher);
        const first = publishers[0]!;
        if (rank === 0) await publisher.bind();
        else
          await publisher.bind(
            offsetPort(first.endpoint, rank),
            first.replayEndpoint === undefined ? undefined : offsetPort(first.replayEndpoint, rank),
          );
      }
      return publishers;
    } catch (error) {
      lastError = error;
      await Promise.all(publishers.map((p) => p.close()));
    }
  }
  throw lastError;
}

function offsetPort(endpoint: string, rank: number): string {
  const colon = endpoint.lastIndexOf(":");
  return `${endpoint.slice(0, colon)}:${Number(endpoint.slice(colon + 1)) + rank}`;
}

/** How the flavor's engine loads KV back from its CPU tier (engine.ts loadRule). */
export function loadRuleOf(flavor: SimFlavor): "async" | "layerwise" {
  return flavor === "sglang" ? "layerwise" : "async";
}

/** The engine's ranks, each with its own KV cache (announcing to its publisher, if any) and scheduler. */
export function makeRanks(
  dpSize: number,
  options: ResolvedSimOptions,
  publishers: readonly SimKvPublisher[],
  clock: Clock,
  /** How much slower than the timing model the engine runs now (time scale, slowdown fault). */
  delayFactor: () => number,
): SimRank[] {
  return Array.from({ length: dpSize }, (_, rank) => {
    const publisher = publishers[rank];
    const kv = new PrefixKvCache({
      capacityTokens: options.kvCapacityTokens,
      blockSize: options.blockSize,
      cpuTierTokens: options.cpuTierTokens,
      ...(publisher !== undefined ? { listener: publisher } : {}),
    });
    const engine = new Engine(
      {
        timing: options,
        maxRunning: options.maxRunning,
        maxBatchTokens: options.maxBatchTokens,
        delayFactor,
        firstTokenDelayMs: options.firstTokenDelayMs,
        prefillFirst: options.stepRule === "prefill-first",
        loadRule: loadRuleOf(options.flavor),
        gaugeRule: gaugeRuleOf(options),
        ...(options.priorityScheduling ? prioritySchedulingOf(options) : {}),
      },
      kv,
      clock,
    );
    return { kv, engine, requests: 0 };
  });
}

/** When the flavor's engine sets its /metrics gauges (sim/engine-gauges.ts). */
function gaugeRuleOf(options: ResolvedSimOptions): GaugeRule {
  if (options.decodeLogInterval === 0) return "live";
  return options.flavor === "vllm" ? "step" : { decodeLogInterval: options.decodeLogInterval };
}

/**
 * The engine's priority scheduling for the flavor: its order, and preemption for a waiting request
 * only as SGLang does it (vLLM's v1 scheduler does none: vllm/v1/core/sched/scheduler.py).
 */
function prioritySchedulingOf(options: ResolvedSimOptions) {
  const order = { priorityOrder: priorityOrderOf(options.flavor) };
  if (options.flavor === "vllm" || options.disablePriorityPreemption) return order;
  return { ...order, preemptionThreshold: options.prioritySchedulingPreemptionThreshold };
}
