/**
 * Assembles --kv-events: the precise index, the hybrid index around the base index, and (once the
 * worker registry exists) the manager that feeds them. The hybrid index is created first because
 * it follows the registry's workers from the start (index/membership.ts); the manager needs the
 * registry, so the hybrid index reaches it through a TokenSource that answers "not live" until the manager is attached.
 */
import type { Registry } from "prom-client";
import { HybridIndex, type TokenSource } from "../index/hybrid-index.js";
import { PreciseIndex } from "../index/precise-index.js";
import type { PrefixIndex } from "../index/prefix-index.js";
import type { Logger } from "../logger.js";
import type { WorkerRegistry } from "../workers/registry.js";
import { loadLocalTokenizer } from "./local-tokenizer.js";
import { KvEventsManager } from "./manager.js";

export interface KvEventsSetup {
  readonly index: HybridIndex;
  /** Starts the intake for the registry's workers (and those added later). */
  attach(registry: WorkerRegistry, promRegistry: Registry, logger: Logger): KvEventsManager;
}

/** The settings --kv-events reads, under their names in Config (server.ts passes its Config). */
export interface KvEventsSettings {
  readonly kvEventsEndpointTemplate: string;
  readonly kvEventsReplayTemplate: string;
  readonly kvEventsReplayTimeoutMs: number;
  readonly kvEventsRebuildSecs: number;
  readonly kvEventsMaxMessageBytes: number;
  readonly kvEventsDpSize: number;
  readonly kvIndexMaxBlocks: number;
  readonly kvSpeculativeTtlMs: number;
  readonly kvBlockSize: number;
  readonly tokenizeTimeoutMs: number;
  readonly tokenizerCacheTokens: number;
  /** "" = none: tokenize through the workers' /tokenize. */
  readonly tokenizerPath: string;
}

export function setUpKvEvents(config: KvEventsSettings, base: PrefixIndex): KvEventsSetup {
  // Loaded before anything starts, so that a bad file stops the router with a clear error.
  const localTokenizer =
    config.tokenizerPath === "" ? undefined : loadLocalTokenizer(config.tokenizerPath);
  const precise = new PreciseIndex({
    maxBlocksPerWorker: config.kvIndexMaxBlocks,
    speculativeTtlMs: config.kvSpeculativeTtlMs,
  });
  let manager: KvEventsManager | undefined;
  const source: TokenSource = {
    isLive: (id) => manager?.isLive(id) ?? false,
    ranksOf: (id) => manager?.ranksOf(id) ?? 1,
    rankLoad: (id, rank) => manager?.rankLoad(id, rank) ?? 0,
    cached: (model, input) => manager?.cached(model, input),
    cachedPrefix: (model, input) => manager?.cachedPrefix(model, input),
    tokenize: (ids, model, input) =>
      manager?.tokenize(ids, model, input) ?? Promise.resolve(undefined),
  };
  const index = new HybridIndex(base, precise, source, {
    tokenizeBudgetMs: config.tokenizeTimeoutMs,
    defaultBlockSize: config.kvBlockSize,
    onTokenizeMiss: (reason) => manager?.metrics.tokenize.inc({ outcome: reason }),
  });
  return {
    index,
    attach(registry, promRegistry, logger) {
      manager = new KvEventsManager(
        {
          endpointTemplate: config.kvEventsEndpointTemplate,
          replayTemplate: config.kvEventsReplayTemplate,
          replayTimeoutMs: config.kvEventsReplayTimeoutMs,
          rebuildMs: config.kvEventsRebuildSecs * 1000,
          maxMessageBytes: config.kvEventsMaxMessageBytes,
          maxPendingBlocks: config.kvIndexMaxBlocks,
          // A slow answer still fills the cache for the next request with this prefix.
          tokenizeRequestTimeoutMs: Math.max(1000, config.tokenizeTimeoutMs * 10),
          tokenizerCacheTokens: config.tokenizerCacheTokens,
          dpSize: config.kvEventsDpSize,
          localTokenizer,
        },
        precise,
        registry,
        promRegistry,
        logger,
      );
      return manager;
    },
  };
}
