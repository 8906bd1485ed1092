/**
 * The index stack is built in one pass (issue 21, item 4): the registry first, then base →
 * hybrid → publishing, each layer given the real parts it needs. No stand-in answers for the
 * KV-event feed until a later step attaches it: a worker is subscribed the moment the registry
 * adds it, and the hybrid index asks the event feed itself whether its stream is live.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import { buildIndexStack, indexStackOptions } from "../../src/assembly/index-stack.js";
import { configWith, defaultConfig } from "../../src/config.js";
import { HybridIndex, PRECISE } from "../../src/index/hybrid-index.js";
import { createLogger } from "../../src/logger.js";
import { Metrics } from "../../src/metrics.js";
import { createPolicy } from "../../src/scheduling/builtin-profiles.js";
import { WorkerRegistry } from "../../src/workers/registry.js";
import { postJson, waitFor } from "../helpers/router.js";

let sim: SimWorker;

beforeAll(async () => {
  sim = await startSimWorker({
    id: "one-pass",
    timeScale: 0,
    kvCapacityTokens: 4096,
    kvEvents: { encoding: "array", noReplay: false },
  });
});

afterAll(async () => {
  await sim.close();
});

/** A prompt of several 16-token blocks. */
const text = Array.from({ length: 20 }, (_, i) => `one pass line ${i}: lorem ipsum.\n`).join("");

describe("buildIndexStack", () => {
  it("subscribes a KV-events worker as soon as the registry adds it, and routes precisely on its stream with no attach step", async () => {
    const publisher = sim.kvEvents!;
    const config = configWith({
      kvEvents: true,
      // The sim's own ports, with the worker's host taken from its URL as the template says.
      kvEventsEndpointTemplate: publisher.endpoint.replace("127.0.0.1", "{host}"),
      kvEventsReplayTemplate: publisher.replayEndpoint!.replace("127.0.0.1", "{host}"),
      // prepare() below waits for the engine's /tokenize answer (50 ms by default, which a
      // loaded machine misses, and the match then falls back to the approximate trees).
      tokenizeTimeoutMs: 10_000,
    });
    const registry = new WorkerRegistry({
      breaker: { failureThreshold: 5, openMs: 1000, successThreshold: 1 },
      connectTimeoutMs: 1000,
    });
    const stack = buildIndexStack(indexStackOptions(config, createPolicy("cache_aware", {})), {
      registry,
      metrics: new Metrics(registry),
      logger: createLogger({ level: "silent" }),
    });
    try {
      expect(stack.index).toBeInstanceOf(HybridIndex);
      expect(stack.index.name).toBe(`${PRECISE}+shared`);
      const worker = registry.add(sim.url);
      // Subscribed within the registry's own add: the event feed exists before any worker does.
      expect(stack.kvEvents!.endpointsOf(worker.id)?.endpoint).toBe(publisher.endpoint);
      await waitFor(() => stack.kvEvents!.isLive(worker.id), 10_000, "the event stream live");

      const res = await postJson(`${sim.url}/v1/completions`, { prompt: text, max_tokens: 1 });
      expect(res.status).toBe(200);
      await res.text();
      const hybrid = stack.index as HybridIndex;
      await waitFor(() => hybrid.precise.blockCount(worker.id) > 0, 10_000, "blocks stored");
      const workers = [{ id: worker.id }];
      await stack.index.prepare?.({ text, tokenizeInput: { prompt: text } }, workers);
      const out = [0];
      stack.index.match(text, undefined, workers, out);
      expect(stack.index.sourceOf?.(worker.id)).toBe(PRECISE);
      expect(out[0]).toBeGreaterThan(0);

      registry.remove(worker.id);
      expect(stack.kvEvents!.endpointsOf(worker.id)).toBeUndefined();
      expect(hybrid.precise.blockCount(worker.id)).toBe(0);
    } finally {
      stack.kvEvents?.close();
      await registry.close();
    }
  });

  it("builds the base index alone when --kv-events and --state-url are off", () => {
    const registry = new WorkerRegistry({
      breaker: { failureThreshold: 5, openMs: 1000, successThreshold: 1 },
      connectTimeoutMs: 1000,
    });
    const stack = buildIndexStack(
      indexStackOptions(defaultConfig(), createPolicy("cache_aware", {})),
      { registry, metrics: new Metrics(registry), logger: createLogger({ level: "silent" }) },
    );
    expect(stack.index.name).toBe("shared");
    expect(stack.kvEvents).toBeUndefined();
    expect(stack.sharedState).toBeUndefined();
    // The stack follows the registry: a worker added is indexed, and tree budgets are set on it.
    const worker = registry.add("http://127.0.0.1:40001");
    stack.index.insert(worker.id, undefined, "hello");
    expect(worker.indexedChars()).toBe(5);
    expect(worker.treeBudget).toBeGreaterThan(0);
  });
});
