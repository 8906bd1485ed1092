/**
 * The cost model of one engine step (one forward pass over the running batch), in model
 * milliseconds, before `timeScale`. A roofline: a step costs the larger of
 *
 * - compute: every token in the step (prefill chunks + one per decoding sequence) at the prefill
 *   throughput, and
 * - memory: a floor (reading the weights, launching the step) + a small cost per sequence in the
 *   batch + reading the KV cache of every token those sequences attend to.
 *
 * So a long uncached prefill is compute-bound (tokens / throughput), a decode step is memory-bound
 * (a floor that grows mildly with batch size and context), and cached prompt tokens cost nothing
 * to prefill. docs/simulator.md gives the published figures behind the defaults.
 */

export interface TimingModel {
  /** Prefill (compute-bound) throughput, tokens per second. */
  prefillTokensPerSec: number;
  /** Memory-bound floor of any step, ms (weights read once per step). */
  stepFloorMs: number;
  /** Extra cost per sequence in the batch, ms (sampling, scheduling, per-sequence kernels). */
  decodePerSeqMs: number;
  /** Cost of reading the KV of 1000 context tokens, ms (memory bandwidth). */
  kvReadMsPer1kTokens: number;
  /**
   * KV tokens loaded per second from the CPU tier into the GPU cache (an offload hit): a transfer
   * over PCIe, several times faster than computing them again.
   */
  offloadTokensPerSec: number;
}

export const DEFAULT_TIMING: Readonly<TimingModel> = Object.freeze({
  prefillTokensPerSec: 30_000,
  stepFloorMs: 6,
  decodePerSeqMs: 0.03,
  kvReadMsPer1kTokens: 0.04,
  // A fifth of the prefill time of the same tokens: --kv-tier-weights' default credits a CPU hit 0.8.
  offloadTokensPerSec: 150_000,
});

/** What one step processes. */
export interface StepShape {
  /** Uncached prompt tokens computed in this step (all prefill chunks). */
  prefillTokens: number;
  /** Sequences producing one output token in this step. */
  decodeSeqs: number;
  /** Sequences in the step (prefilling + decoding). */
  seqs: number;
  /** Tokens whose KV the step reads: each sequence's context length, summed. */
  contextTokens: number;
  /**
   * Cached tokens loaded from the CPU tier during the step, layer by layer alongside its compute
   * (SGLang's HiCache; absent: none). vLLM loads off the step loop instead (engine.ts loadRule).
   */
  loadedTokens?: number;
}

/** Model duration of one step, ms. An empty step costs nothing. */
export function stepDurationMs(m: TimingModel, s: StepShape): number {
  if (s.seqs === 0) return 0;
  const computeMs = ((s.prefillTokens + s.decodeSeqs) * 1000) / m.prefillTokensPerSec;
  const memoryMs =
    m.stepFloorMs + m.decodePerSeqMs * s.seqs + (m.kvReadMsPer1kTokens * s.contextTokens) / 1000;
  const loadMs = s.loadedTokens ? (s.loadedTokens * 1000) / m.offloadTokensPerSec : 0;
  // The transfer overlaps the forward pass: a layer waits only for its own share.
  return Math.max(computeMs, memoryMs, loadMs);
}

/**
 * Model duration of prefilling `uncachedTokens` of a prompt whose first `cachedTokens` are
 * already in the cache, alone in a step: ≈ max(stepFloorMs, uncached / prefillTokensPerSec).
 */
export function prefillMs(m: TimingModel, uncachedTokens: number, cachedTokens = 0): number {
  return stepDurationMs(m, {
    prefillTokens: uncachedTokens,
    decodeSeqs: 0,
    seqs: 1,
    contextTokens: cachedTokens + uncachedTokens,
  });
}

/** Model duration of one decode step for `batch` sequences reading `contextTokens` in total. */
export function decodeStepMs(m: TimingModel, batch: number, contextTokens: number): number {
  return stepDurationMs(m, { prefillTokens: 0, decodeSeqs: batch, seqs: batch, contextTokens });
}

export interface LatencyEstimate {
  /** Time to first token: the prefill steps (chunked by maxBatchTokens). */
  ttftMs: number;
  /** Time per output token after the first. */
  tpotMs: number;
  /** End to end. */
  totalMs: number;
}

/**
 * Model latency of one request alone on an idle engine (no queueing, no batch-mates): a closed
 * form of what the engine's step loop does, for docs and sanity checks.
 */
export function estimateLatency(
  m: TimingModel,
  r: { promptTokens: number; cachedTokens: number; outputTokens: number; maxBatchTokens: number },
): LatencyEstimate {
  let ttftMs = 0;
  let computed = r.cachedTokens;
  while (computed < r.promptTokens) {
    const chunk = Math.min(r.promptTokens - computed, r.maxBatchTokens);
    ttftMs += prefillMs(m, chunk, computed);
    computed += chunk;
  }
  let decodeMs = 0;
  for (let i = 1; i < r.outputTokens; i++) decodeMs += decodeStepMs(m, 1, r.promptTokens + i);
  const tpotMs = r.outputTokens > 1 ? decodeMs / (r.outputTokens - 1) : 0;
  return { ttftMs, tpotMs, totalMs: ttftMs + decodeMs };
}
