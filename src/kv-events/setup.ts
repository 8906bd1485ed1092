/**
 * Assembles --kv-events in one pass: the precise index, the manager that feeds it from the
 * engines' events (and tokenizes for it), and the hybrid index around the base index, which asks
 * the manager directly whether a worker's stream is live. The registry exists before the index
 * stack (it knows nothing of the index), so nothing waits for a later step.
 */
import type { Registry } from "prom-client";
import { HybridIndex } from "../index/hybrid-index.js";
import { parseTierWeights } from "../index/kv-tiers.js";
import { PreciseIndex } from "../index/precise-index.js";
import type { PrefixIndex } from "../index/prefix-index.js";
import type { Logger } from "../logger.js";
import type { WorkerRegistry } from "../workers/registry.js";
import { loadLocalTokenizer } from "./local-tokenizer.js";
import { KvEventsManager } from "./manager.js";
import type { KvEventsConfig } from "./settings.js";

export interface KvEventsSetup {
  readonly index: HybridIndex;
  /**
   * The event feed; it follows the registry's workers once `followRegistry()` is called (the index
   * stack calls it after the index follows the registry).
   */
  readonly manager: KvEventsManager;
}

/** The settings the event feed is built from (kv-events/settings.ts). */
export type KvEventsSettings = Omit<KvEventsConfig, "kvEvents" | "kvEventsAllowIpc">;

/** What the event feed is built with besides its settings. */
export interface KvEventsDeps {
  readonly registry: WorkerRegistry;
  readonly promRegistry: Registry;
  readonly logger: Logger;
}

export function setUpKvEvents(
  config: KvEventsSettings,
  base: PrefixIndex,
  deps: KvEventsDeps,
): KvEventsSetup {
  // Loaded before anything starts, so that a bad file stops the router with a clear error.
  const localTokenizer =
    config.tokenizerPath === "" ? undefined : loadLocalTokenizer(config.tokenizerPath);
  const precise = new PreciseIndex({
    maxBlocksPerWorker: config.kvIndexMaxBlocks,
    speculativeTtlMs: config.kvSpeculativeTtlMs,
    tierWeights: parseTierWeights(config.kvTierWeights),
  });
  const manager = new KvEventsManager(
    {
      endpointTemplate: config.kvEventsEndpointTemplate,
      replayTemplate: config.kvEventsReplayTemplate,
      replayTimeoutMs: config.kvEventsReplayTimeoutMs,
      rebuildMs: config.kvEventsRebuildMs,
      maxMessageBytes: config.kvEventsMaxMessageBytes,
      maxPendingBlocks: config.kvIndexMaxBlocks,
      // A slow answer still fills the cache for the next request with this prefix.
      tokenizeRequestTimeoutMs: Math.max(1000, config.tokenizeTimeoutMs * 10),
      tokenizerCacheTokens: config.tokenizerCacheTokens,
      dpSize: config.kvEventsDpSize,
      localTokenizer,
    },
    precise,
    deps.registry,
    deps.promRegistry,
    deps.logger,
  );
  const index = new HybridIndex(base, precise, manager, {
    tokenizeBudgetMs: config.tokenizeTimeoutMs,
    defaultBlockSize: config.kvBlockSize,
    onTokenizeMiss: (reason) => manager.metrics.tokenize.inc({ outcome: reason }),
  });
  return { index, manager };
}
