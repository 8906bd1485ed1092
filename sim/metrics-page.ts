/** GET /metrics: the engine's Prometheus page, one series per data-parallel rank (metrics.ts renders it). */
import type { ServerResponse } from "node:http";
import type { SimRank } from "./dp-ranks.js";
import type { GaugeValues } from "./engine-gauges.js";
import { METRICS_CONTENT_TYPE, renderMetrics } from "./metrics.js";
import type { SimFlavor } from "./options.js";
import type { SimStats } from "./sim-worker.js";

export function sendMetrics(
  res: ServerResponse,
  flavor: SimFlavor,
  model: string,
  s: SimStats,
  simRanks: readonly SimRank[],
  /** Series appended as they are (vLLM's lora_requests_info, sim/lora-slots.ts). */
  extra = "",
): void {
  // Rank 0's cache: the whole engine's without data parallelism (capacity, block size).
  const kv0 = simRanks[0]!.kv;
  const whole = {
    model: model,
    running: s.running,
    waiting: s.waiting,
    kvUsage: s.kvUsage,
    kvUsedTokens: (kv0.pinnedBlocks + kv0.reservedBlocks) * kv0.blockSize,
    promptTokens: s.promptTokens,
    cachedTokens: s.cachedTokens,
    generationTokens: s.completionTokens,
    completedRequests: s.completed,
    kvBlocks: kv0.totalBlocks,
    blockSize: kv0.blockSize,
  };
  // With data parallelism: a series per rank, as both engines report them (the counters are
  // kept for the whole engine and shown on rank 0, so that the sums stay right).
  const none = { promptTokens: 0, cachedTokens: 0, generationTokens: 0, completedRequests: 0 };
  // The gauges as the engine last set them (sim/engine-gauges.ts), not as it is now.
  const gauges = simRanks.map(({ engine }) => engine.reported());
  whole.running = gauges.reduce((n, g) => n + g.running, 0);
  whole.waiting = gauges.reduce((n, g) => n + g.waiting, 0);
  whole.kvUsage = gauges.reduce((n, g) => n + g.kvUsage, 0) / gauges.length;
  const ranks = simRanks.map(({ kv }, i) => ({
    ...whole,
    ...(i > 0 ? none : {}),
    running: (gauges[i] as GaugeValues).running,
    waiting: (gauges[i] as GaugeValues).waiting,
    kvUsage: (gauges[i] as GaugeValues).kvUsage,
    kvUsedTokens: (kv.pinnedBlocks + kv.reservedBlocks) * kv.blockSize,
    kvBlocks: kv.totalBlocks,
  }));
  const text = renderMetrics(flavor, whole, ranks) + extra;
  res.writeHead(200, {
    "content-type": METRICS_CONTENT_TYPE,
    "content-length": Buffer.byteLength(text),
  });
  res.end(text);
}
