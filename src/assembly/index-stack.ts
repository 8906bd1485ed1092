/**
 * The index stack, built once, in order: the base index (--prefix-index, or the one a profile
 * brings), the hybrid index around it (--kv-events), the replication's publishing layers around
 * either (--state-url, radixgate-cluster: state/replication.ts). The registry exists first and knows nothing of the index; the stack subscribes to
 * its added/removed events (index/follow-workers.ts) before anything else does, so every later
 * listener (the KV-event feed, the tree budgets, the replication) sees the index up to date.
 */
import { BlockHashIndex } from "../index/block-hash-index.js";
import { createBaseIndex, type PrefixIndexName } from "../index/factory.js";
import { followWorkers } from "../index/follow-workers.js";
import type { PrefixIndex } from "../index/prefix-index.js";
import { RankedIndex } from "../index/ranked-index.js";
import type { IndexConfig } from "../index/settings.js";
import type { KvEventsManager } from "../kv-events/manager.js";
import type { KvEventsConfig } from "../kv-events/settings.js";
import { setUpKvEvents } from "../kv-events/setup.js";
import type { Logger } from "../logger.js";
import type { Metrics } from "../metrics.js";
import type { Policy } from "../scheduling/policy.js";
import type { SiblingLink } from "../state/cluster-channel.js";
import { ClusterTransport } from "../state/cluster-transport.js";
import { RedisTransport } from "../state/redis-transport.js";
import { Replication, type Transport } from "../state/replication.js";
import {
  type SharedStateOptions,
  type StateConfig,
  sharedStateOptions,
} from "../state/settings.js";
import type { WorkerRegistry } from "../workers/registry.js";
import { TreeBudgets } from "../workers/tree-budget.js";
import type { Worker } from "../workers/worker.js";

export interface IndexStackOptions {
  /** The base index: --prefix-index, or the block-hash index a profile brings. */
  readonly prefixIndex: PrefixIndexName;
  /** --max-tree-size: a fixed budget per worker, or "auto" (learned from the engines). */
  readonly maxTreeSize: number | "auto";
  /** --tree-capacity-factor: the share of an engine's KV capacity its tree may hold. */
  readonly treeCapacityFactor: number;
  /** Block-hash index: characters a block; "auto" learns it from the engines (GIE's autoTune). */
  readonly blockChars: number | "auto";
  /** Block-hash index: blocks each worker holds until a budget is set. */
  readonly capacityBlocks: number;
  /** --kv-events: the hybrid index and its event feed; undefined = off. */
  readonly kvEvents: KvEventsConfig | undefined;
  /** --state-url: decisions published to and applied from the peers; undefined = off. */
  readonly sharedState: SharedStateOptions | undefined;
  /** --dp-aware: a tree per data-parallel rank (without --kv-events, which follows ranks itself). */
  readonly dpAware: boolean;
}

/** The stack's options from its features' settings and the policy (a profile may fix its own index). */
export function indexStackOptions(
  config: { index: IndexConfig; kvEvents: KvEventsConfig; state: StateConfig },
  policy: Policy,
): IndexStackOptions {
  const { index } = config;
  return {
    prefixIndex: policy.prefixIndex?.name ?? index.prefixIndex,
    maxTreeSize: index.maxTreeSize,
    treeCapacityFactor: index.treeCapacityFactor,
    blockChars: policy.prefixIndex?.blockChars ?? index.blockHashChars,
    capacityBlocks: index.blockHashCapacity,
    kvEvents: config.kvEvents.kvEvents ? config.kvEvents : undefined,
    sharedState: sharedStateOptions(config.state),
    dpAware: index.dpAware,
  };
}

/** radixgate-cluster without --state-url: the local claims' wait and life, the queue of decisions. */
const SIBLING_CLAIM_TIMEOUT_MS = 50;
const SIBLING_CLAIM_TTL_MS = 2000;
const SIBLING_QUEUE_SIZE = 10_000;

export interface IndexStackDeps {
  readonly registry: WorkerRegistry;
  readonly metrics: Metrics;
  readonly logger: Logger;
  /** A worker a peer replica or sibling process added (probed here before it takes traffic). */
  readonly onRemoteAdd?: (worker: Worker) => void;
  /** A radixgate-cluster process: decisions shared with its siblings over the local channel. */
  readonly siblings?: SiblingLink | undefined;
  /** Characters any eviction removed (besides the metric: the fleet's cache pressure). */
  readonly onEvict?: (chars: number) => void;
}

export interface IndexStack {
  /** The outermost index: the one the decider asks and the eviction timer visits. */
  readonly index: PrefixIndex;
  /** The index below the publishing layers: what a snapshot loads into (not shared again). */
  readonly local: PrefixIndex;
  readonly kvEvents: KvEventsManager | undefined;
  /** What this replica shares with its peers (--state-url, radixgate-cluster); undefined = alone. */
  readonly replication: Replication | undefined;
  /** Its Redis transport (--state-url). */
  readonly sharedState: RedisTransport | undefined;
  /** Its radixgate-cluster channel (a process the cluster started). */
  readonly siblingState: ClusterTransport | undefined;
  /** After each read of a worker's engine: its tree budget, block size and data-parallel ranks. */
  engineRead(worker: Worker): void;
}

export function buildIndexStack(options: IndexStackOptions, deps: IndexStackDeps): IndexStack {
  const { registry, metrics, logger } = deps;
  const base = createBaseIndex(options.prefixIndex, {
    maxTreeSize: options.maxTreeSize === "auto" ? undefined : options.maxTreeSize,
    ...(options.blockChars === "auto" ? {} : { blockChars: options.blockChars }),
    capacityBlocks: options.capacityBlocks,
    onEvict: (chars) => {
      metrics.evictedChars.inc(chars);
      deps.onEvict?.(chars);
    },
  });
  // --kv-events: the precise index from the engines' events, with the base index as fallback.
  const kv =
    options.kvEvents === undefined
      ? undefined
      : setUpKvEvents(options.kvEvents, base, {
          registry,
          promRegistry: metrics.registry,
          logger,
        });
  // --dp-aware: one tree per rank of each data-parallel engine, as the engine said it runs.
  const ranked =
    options.dpAware && kv === undefined
      ? new RankedIndex(base, {
          ranksOf: (id) => registry.get(id)?.signals.dpSize ?? 1,
          rankLoad: (id, rank) => registry.get(id)?.rankLoad(rank) ?? 0,
        })
      : base;
  const inner: PrefixIndex = kv?.index ?? ranked;
  const link = deps.siblings;
  const sharedState =
    options.sharedState === undefined
      ? undefined
      : new RedisTransport(
          link === undefined
            ? options.sharedState
            : { ...options.sharedState, replicaGroup: link.group },
          logger,
        );
  const siblingState =
    link === undefined
      ? undefined
      : new ClusterTransport(
          link.transport,
          {
            claimTimeoutMs: options.sharedState?.claimTimeoutMs ?? SIBLING_CLAIM_TIMEOUT_MS,
            claimTtlMs: options.sharedState?.claimTtlMs ?? SIBLING_CLAIM_TTL_MS,
            queueSize: options.sharedState?.queueSize ?? SIBLING_QUEUE_SIZE,
            ...(link.rank !== undefined ? { rank: link.rank } : {}),
          },
          logger,
        );
  // Redis first: it carries the worker set and the claims when it is on (it spans every host).
  const transports: Transport[] = [];
  if (sharedState !== undefined) transports.push(sharedState);
  if (siblingState !== undefined) transports.push(siblingState);
  const replication =
    transports.length === 0
      ? undefined
      : new Replication(transports, {
          registry,
          logger,
          metricsRegistry: metrics.registry,
          ...(deps.onRemoteAdd !== undefined ? { onRemoteAdd: deps.onRemoteAdd } : {}),
        });
  const index = replication?.wrapIndex(inner) ?? inner;

  // Who follows the registry, in this order: the index first, then what relies on it knowing the
  // worker (the event feed filling its precise part, the budgets set on it, the peers told of it).
  followWorkers(index, registry);
  kv?.manager.followRegistry();
  // Tree budgets follow the engines' KV capacity (--max-tree-size auto) or stay fixed.
  const budgets = new TreeBudgets(index, options.maxTreeSize, options.treeCapacityFactor);
  registry.onChange((event, worker) => {
    if (event === "added") budgets.added(worker);
  });
  // The peers' changes and decisions, once the index and its followers know the registry.
  replication?.attach();

  // A profile that fixes its block size (aibrix_prefix: 128 characters) keeps it.
  const learnBlocks = options.blockChars === "auto" && base instanceof BlockHashIndex;
  return {
    index,
    local: inner,
    kvEvents: kv?.manager,
    replication,
    sharedState,
    siblingState,
    engineRead(worker) {
      budgets.update(worker);
      // --block-hash-chars auto: blocks as large as the engine's (GIE's autoTune).
      if (learnBlocks && base.learnBlockTokens(worker.signals.blockSizeTokens)) {
        logger.info(
          { worker: worker.id, block_chars: base.blockChars },
          "block-hash index: block size learned from the engine; blocks held so far forgotten",
        );
      }
      kv?.manager.learnRanks(worker);
    },
  };
}
