/**
 * The workloads of bench:routing and their presets. Every size is in the simulator's tokens
 * (4 characters each). The fleet's KV capacity is fixed per preset, and the workloads are sized
 * against it the way a busy production fleet is: the reused working set of shared-prefix and
 * multi-turn is about twice one worker's KV cache, so it fits in the fleet (4 workers) only if
 * each worker keeps its own share of it.
 */
import type { SimFlavor } from "../../sim/options.js";
import { CHARS_PER_TOKEN } from "../../sim/tokenizer.js";
import {
  type CachePressureOptions,
  cachePressure,
  generatedSharedPrefix,
  hotPrefix,
  type MultimodalOptions,
  multimodalChat,
  multiTurnChat,
  noSharing,
  promptTextOf,
  type RequestSpec,
} from "../../sim/workloads.js";
import { RadixTree } from "../../src/tree/radix-tree.js";

export const WORKLOADS = [
  "shared-prefix",
  "multi-turn",
  "no-sharing",
  "hot-prefix",
  "cache-pressure",
  "tenants",
  "multimodal",
  "offload",
] as const;
export type WorkloadName = (typeof WORKLOADS)[number];
/**
 * Not in `--workload all`: offload compares two settings of the precise row
 * (`--policies precise,precise:tier-blind`), not every policy.
 */
export const OPT_IN_WORKLOADS: readonly WorkloadName[] = ["offload"];

export interface RoutingPreset {
  name: string;
  workers: number;
  /** Closed loop: requests outstanding at once. */
  concurrency: number;
  /** Real ms per model ms of the simulated engines. */
  timeScale: number;
  /** KV cache of each simulated worker, tokens. */
  kvCapacityTokens: number;
  seed: number;
  sharedPrefix: {
    groups: number;
    promptsPerGroup: number;
    systemPromptTokens: number;
    questionTokens: number;
    outputTokens: number;
  };
  multiTurn: {
    conversations: number;
    turns: number;
    systemPromptTokens: number;
    turnTokens: number;
    outputTokens: number;
  };
  noSharing: { requests: number; promptTokens: number; outputTokens: number };
  hotPrefix: {
    requests: number;
    systemPromptTokens: number;
    questionTokens: number;
    outputTokens: number;
  };
  /**
   * Its fleet's KV is sized from its own working set (every distinct prompt token), not by
   * kvCapacityTokens: each worker holds `kvShareOfWorkingSet` of it, so the fleet holds less than
   * all of it and which worker keeps what decides the hit rate.
   */
  cachePressure: Omit<CachePressureOptions, "seed"> & { kvShareOfWorkingSet: number };
  /**
   * The tenants family (--workload tenants, --matrix): cache-pressure's shape with a spread of
   * tenant prompt lengths, sized like cache-pressure (each worker's KV a share of the working set).
   * Its own number of clients (closed loop), also the conversations under way at once.
   */
  tenants: TenantsShape;
  /** One shared system prompt; a share of the chats send one of a few images (multimodalChat). */
  multimodal: Omit<MultimodalOptions, "seed">;
  /**
   * Engines that offload KV to a CPU tier (--workload offload): shared-prefix's shape, prefill
   * bound (short outputs), its own clients; the fleet's GPU caches hold OFFLOAD_GPU_SHARE of the
   * working set, its CPU tiers OFFLOAD_CPU_SHARE.
   */
  offload: RoutingPreset["sharedPrefix"] & { concurrency: number };
}

/** One cell of the tenants family (bench/lib/routing-matrix.ts varies these). */
export interface TenantsShape {
  tenants: number;
  zipfExponent: number;
  toolPreambleTokens: number;
  /** Each tenant's own prompt: uniform between these (tokens). */
  tenantPromptMinTokens: number;
  tenantPromptMaxTokens: number;
  conversations: number;
  /** Clients of the closed loop, one conversation each at a time (the preset's concurrency is not used). */
  clients: number;
  turns: number;
  turnTokens: number;
  outputTokens: number;
  /**
   * The fleet's KV as a share of the working set: each worker holds `fleetKvShare / workers` of
   * it. A worker must still hold its largest request with room to spare (FEASIBLE_REQUESTS), so
   * where the share of this many conversations' working set would not, the generator adds
   * conversations (more distinct history, no longer request) until it does.
   */
  fleetKvShare: number;
}

/**
 * The least KV a worker gets in the tenants family, in largest requests: an engine refuses a
 * request larger than its cache (400), and one that only just fits runs alone with nothing cached.
 */
export const FEASIBLE_REQUESTS = 1.25;

/**
 * The default run. Shared-prefix has the shape of SGLang bench_serving's generated-shared-prefix
 * (2048-token system prompts, 128-token questions, 256 output tokens, 16 questions per prompt).
 * KV is 48k tokens per worker (192k in the fleet): shared-prefix reuses 48 × 2048 = 98k tokens of
 * system prompts, multi-turn 40 chats of up to 2944 tokens = 118k, both about 2-2.5× one worker.
 * Engines run at half real time (a 6 ms decode step takes 3 ms).
 */
export const FULL_PRESET: RoutingPreset = {
  name: "full",
  workers: 4,
  concurrency: 32,
  timeScale: 0.5,
  kvCapacityTokens: 48_000,
  seed: 42,
  sharedPrefix: {
    groups: 48,
    promptsPerGroup: 16,
    systemPromptTokens: 2048,
    questionTokens: 128,
    outputTokens: 256,
  },
  multiTurn: {
    conversations: 40,
    turns: 6,
    systemPromptTokens: 1024,
    turnTokens: 128,
    outputTokens: 192,
  },
  noSharing: { requests: 256, promptTokens: 2048, outputTokens: 256 },
  hotPrefix: { requests: 384, systemPromptTokens: 2048, questionTokens: 128, outputTokens: 256 },
  cachePressure: {
    tenants: 64,
    zipfExponent: 1,
    toolPreambleTokens: 1536,
    tenantPromptTokens: 1024,
    conversations: 128,
    activeConversations: 32,
    turns: 4,
    turnTokens: 64,
    outputTokens: 96,
    kvShareOfWorkingSet: 0.22,
  },
  // The shape of the multi-tenant workload issue 32 was found on: 16 Zipf tenants sharing a long
  // tool preamble, system prompts of 2-6k characters, 64 chats of 4 turns, 8 clients.
  tenants: {
    tenants: 16,
    zipfExponent: 1,
    toolPreambleTokens: 1024,
    tenantPromptMinTokens: 512,
    tenantPromptMaxTokens: 1536,
    conversations: 64,
    clients: 8,
    turns: 4,
    turnTokens: 64,
    outputTokens: 64,
    fleetKvShare: 0.3,
  },
  multimodal: {
    requests: 384,
    images: 20,
    imageShare: 0.5,
    systemPromptTokens: 1024,
    instructionTokens: 256,
    questionTokens: 64,
    outputTokens: 64,
  },
  offload: {
    groups: 96,
    promptsPerGroup: 6,
    systemPromptTokens: 4096,
    questionTokens: 128,
    outputTokens: 32,
    concurrency: 16,
  },
};

/** The same shapes, smaller and on a faster clock: every workload in well under a minute. */
export const QUICK_PRESET: RoutingPreset = {
  name: "quick",
  workers: 4,
  concurrency: 16,
  timeScale: 0.2,
  kvCapacityTokens: 12_000,
  seed: 42,
  sharedPrefix: {
    groups: 12,
    promptsPerGroup: 8,
    systemPromptTokens: 2048,
    questionTokens: 128,
    outputTokens: 32,
  },
  multiTurn: {
    conversations: 12,
    turns: 4,
    systemPromptTokens: 1024,
    turnTokens: 128,
    outputTokens: 32,
  },
  noSharing: { requests: 64, promptTokens: 2048, outputTokens: 32 },
  hotPrefix: { requests: 96, systemPromptTokens: 2048, questionTokens: 128, outputTokens: 32 },
  cachePressure: {
    tenants: 24,
    zipfExponent: 1,
    toolPreambleTokens: 1024,
    tenantPromptTokens: 768,
    conversations: 48,
    activeConversations: 16,
    turns: 3,
    turnTokens: 64,
    outputTokens: 32,
    kvShareOfWorkingSet: 0.22,
  },
  tenants: {
    tenants: 16,
    zipfExponent: 1,
    toolPreambleTokens: 512,
    tenantPromptMinTokens: 256,
    tenantPromptMaxTokens: 768,
    conversations: 32,
    clients: 8,
    turns: 3,
    turnTokens: 64,
    outputTokens: 32,
    // At 0.3 a worker would not hold 1.25 of its largest requests without 3× the conversations.
    fleetKvShare: 0.6,
  },
  multimodal: {
    requests: 160,
    images: 20,
    imageShare: 0.5,
    systemPromptTokens: 1024,
    instructionTokens: 256,
    questionTokens: 64,
    outputTokens: 16,
  },
  offload: {
    groups: 48,
    promptsPerGroup: 4,
    systemPromptTokens: 2048,
    questionTokens: 128,
    outputTokens: 16,
    concurrency: 8,
  },
};

export interface PreparedWorkload {
  name: WorkloadName;
  specs: RequestSpec[];
  /** Prompt tokens worth keeping cached (shared system prompts, whole conversations). */
  workingSetTokens: number;
  /**
   * The request's affinity group (system prompt, conversation or tenant), when the workload has
   * one: what a sticky client or the oracle keeps on one worker.
   */
  group: ((spec: RequestSpec) => number) | undefined;
  /** The worker (index) an oracle would pin this request to: its group's, `group mod workers`. */
  oracle: ((spec: RequestSpec, workers: number) => number) | undefined;
  /** What this workload is, in one line, for the report. */
  description: string;
  /** KV cache of each simulated worker for this workload, tokens. */
  kvCapacityTokens: number;
  /** A CPU tier behind each worker's KV cache (the offload workload), tokens. */
  cpuTierTokens?: number;
  /** The engine the simulated workers play, when the workload needs one (else the simulator's default). */
  flavor?: SimFlavor;
  /** Clients of the closed loop when the workload sets its own (else the preset's concurrency). */
  concurrency?: number;
}

/** Distinct prompt tokens of a workload: what caching every prompt at once would take. */
export function distinctPromptTokens(specs: readonly RequestSpec[]): number {
  const tree = new RadixTree({ maxChars: Number.MAX_SAFE_INTEGER });
  for (const spec of specs) tree.insert(promptTextOf(spec));
  return Math.ceil(tree.charCount / CHARS_PER_TOKEN);
}

export function prepareWorkload(name: WorkloadName, p: RoutingPreset): PreparedWorkload {
  const prepared = prepareSpecs(name, p);
  const group = prepared.group;
  return {
    ...prepared,
    oracle: group === undefined ? undefined : (spec, workers) => group(spec) % workers,
    kvCapacityTokens: prepared.kvCapacityTokens ?? p.kvCapacityTokens,
  };
}

function prepareSpecs(
  name: WorkloadName,
  p: RoutingPreset,
): Omit<PreparedWorkload, "kvCapacityTokens" | "oracle"> & { kvCapacityTokens?: number } {
  switch (name) {
    case "shared-prefix": {
      const s = p.sharedPrefix;
      return {
        name,
        specs: generatedSharedPrefix({ ...s, kind: "completion", seed: p.seed }),
        workingSetTokens: s.groups * s.systemPromptTokens,
        group: (spec) => spec.group ?? 0,
        description:
          `${s.groups} system prompts × ${s.promptsPerGroup} questions, ` +
          `${s.systemPromptTokens} + ${s.questionTokens} → ${s.outputTokens} tokens, shuffled`,
      };
    }
    case "multi-turn": {
      const m = p.multiTurn;
      const finalTokens = m.systemPromptTokens + m.turns * (m.turnTokens + m.outputTokens);
      return {
        name,
        specs: multiTurnChat({ ...m, seed: p.seed }),
        workingSetTokens: m.conversations * finalTokens,
        group: (spec) => spec.conversation ?? 0,
        description:
          `${m.conversations} chats × ${m.turns} turns, system ${m.systemPromptTokens}, ` +
          `+${m.turnTokens} user / +${m.outputTokens} assistant tokens a turn`,
      };
    }
    case "no-sharing": {
      const s = p.noSharing;
      return {
        name,
        specs: noSharing({ ...s, kind: "completion", seed: p.seed }),
        workingSetTokens: 0,
        group: undefined,
        description: `${s.requests} unique prompts of ${s.promptTokens} → ${s.outputTokens} tokens`,
      };
    }
    case "hot-prefix": {
      const h = p.hotPrefix;
      return {
        name,
        specs: hotPrefix({ ...h, kind: "chat", seed: p.seed }),
        workingSetTokens: h.systemPromptTokens,
        group: undefined,
        description:
          `${h.requests} chats sharing one system prompt, ` +
          `${h.systemPromptTokens} + ${h.questionTokens} → ${h.outputTokens} tokens`,
      };
    }
    case "cache-pressure": {
      const { kvShareOfWorkingSet, ...c } = p.cachePressure;
      const specs = cachePressure({ ...c, seed: p.seed });
      const workingSetTokens = distinctPromptTokens(specs);
      const tenantsSeen = new Set(specs.map((s) => s.group)).size;
      return {
        name,
        specs,
        workingSetTokens,
        // Whole blocks (the simulator's default block size is 16 tokens).
        kvCapacityTokens: Math.ceil((workingSetTokens * kvShareOfWorkingSet) / 16) * 16,
        // Tenant-sticky: every conversation of a tenant on the tenant's worker.
        group: (spec) => spec.group ?? 0,
        description:
          `${c.conversations} chats of ${tenantsSeen}/${c.tenants} Zipf(${c.zipfExponent}) tenants × ${c.turns} turns, ` +
          `${c.activeConversations} at a time, shared tools ${c.toolPreambleTokens} + tenant ${c.tenantPromptTokens}, ` +
          `+${c.turnTokens} user / +${c.outputTokens} assistant tokens a turn, ` +
          `KV per worker ${kvShareOfWorkingSet} of the working set`,
      };
    }
    case "offload": {
      // Engines that offload KV: the fleet's GPU caches hold a quarter of the working set, the CPU
      // tiers behind them all of it, so it stays cached only if each worker keeps its own share
      // (docs/kv-events.md). A worker's GPU still holds its share of the running requests and one
      // more: an engine's batch fits its KV cache; offloading is about what it keeps beyond that.
      const { concurrency, ...o } = p.offload;
      const specs = generatedSharedPrefix({ ...o, kind: "completion", seed: p.seed });
      const workingSetTokens = o.groups * o.systemPromptTokens;
      const wholeBlocks = (tokens: number) => Math.ceil(tokens / 16) * 16;
      // Each running request reserves its prompt and every output token, in whole blocks.
      const request = wholeBlocks(largestPromptTokens(specs) + o.outputTokens);
      const batch = (Math.ceil(concurrency / p.workers) + 1) * request;
      const gpu = Math.max((workingSetTokens * OFFLOAD_GPU_SHARE) / p.workers, batch);
      return {
        name,
        specs,
        workingSetTokens,
        kvCapacityTokens: wholeBlocks(gpu),
        cpuTierTokens: wholeBlocks((workingSetTokens * OFFLOAD_CPU_SHARE) / p.workers),
        // vLLM's offloading connector is what publishes each block's tier (kv-tiers.ts).
        flavor: "vllm",
        group: (spec) => spec.group ?? 0,
        concurrency,
        description:
          `${o.groups} system prompts × ${o.promptsPerGroup} questions, ${o.systemPromptTokens} + ${o.questionTokens} → ${o.outputTokens} tokens, shuffled, ` +
          `${concurrency} clients, on offloading engines: the fleet's GPU KV ${OFFLOAD_GPU_SHARE} of the working set, its CPU tiers ${OFFLOAD_CPU_SHARE}`,
      };
    }
    case "multimodal": {
      const m = p.multimodal;
      return {
        name,
        specs: multimodalChat({ ...m, seed: p.seed }),
        workingSetTokens: m.systemPromptTokens + m.images * (64 + m.instructionTokens),
        // The oracle keeps each image on one worker (the requests without one share worker 0).
        group: (spec) => spec.group ?? 0,
        description:
          `${m.requests} chats behind one ${m.systemPromptTokens}-token system prompt, ` +
          `${m.imageShare * 100}% with one of ${m.images} images then the same ` +
          `${m.instructionTokens}-token instruction, +${m.questionTokens} → ${m.outputTokens} tokens`,
      };
    }
    case "tenants": {
      const t = p.tenants;
      let conversations = t.conversations;
      for (;;) {
        const specs = cachePressure({
          tenants: t.tenants,
          zipfExponent: t.zipfExponent,
          toolPreambleTokens: t.toolPreambleTokens,
          tenantPromptTokens: t.tenantPromptMinTokens,
          tenantPromptMaxTokens: t.tenantPromptMaxTokens,
          conversations,
          activeConversations: t.clients,
          turns: t.turns,
          turnTokens: t.turnTokens,
          outputTokens: t.outputTokens,
          seed: p.seed,
        });
        const workingSetTokens = distinctPromptTokens(specs);
        const perWorker = (workingSetTokens * t.fleetKvShare) / p.workers;
        const floor = FEASIBLE_REQUESTS * largestPromptTokens(specs);
        if (perWorker < floor && conversations < MAX_TENANT_CONVERSATIONS) {
          // History grows about linearly with conversations; a little over, to converge at once.
          conversations = Math.min(
            MAX_TENANT_CONVERSATIONS,
            Math.ceil((conversations * floor * 1.05) / perWorker),
          );
          continue;
        }
        const tenantsSeen = new Set(specs.map((s) => s.group)).size;
        return {
          name,
          specs,
          workingSetTokens,
          // Whole blocks (the simulator's default block size is 16 tokens).
          kvCapacityTokens: Math.ceil(perWorker / 16) * 16,
          group: (spec) => spec.group ?? 0,
          description: `${tenantsDescription({ ...t, conversations }, tenantsSeen)}, ${t.clients} clients`,
          concurrency: t.clients,
        };
      }
    }
  }
}

/** The offload workload's tiers, the fleet's, as shares of its working set. */
export const OFFLOAD_GPU_SHARE = 0.25;
export const OFFLOAD_CPU_SHARE = 1;

/** The tenants family's bound on added conversations (a fleet share too small for any). */
const MAX_TENANT_CONVERSATIONS = 4096;

function largestPromptTokens(specs: readonly RequestSpec[]): number {
  let chars = 0;
  for (const spec of specs) chars = Math.max(chars, promptTextOf(spec).length);
  return Math.ceil(chars / CHARS_PER_TOKEN);
}

/** A tenants cell in one line. */
export function tenantsDescription(t: TenantsShape, tenantsSeen?: number): string {
  return (
    `${t.conversations} chats of ${tenantsSeen === undefined ? "" : `${tenantsSeen}/`}${t.tenants} Zipf(${t.zipfExponent}) tenants × ${t.turns} turns, ` +
    `shared tools ${t.toolPreambleTokens} + tenant ${t.tenantPromptMinTokens}-${t.tenantPromptMaxTokens}, ` +
    `+${t.turnTokens} user / +${t.outputTokens} assistant tokens a turn, fleet KV ${t.fleetKvShare} of the working set`
  );
}
