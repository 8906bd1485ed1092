import { describe, expect, it } from "vitest";
import { ApproximateIndex } from "../../src/index/approximate-index.js";
import { followWorkers } from "../../src/index/follow-workers.js";
import { WorkerRegistry } from "../../src/workers/registry.js";

describe("followWorkers", () => {
  it("the index learns of a worker the registry adds and forgets one it removes (registry event, no workers → index import)", async () => {
    const index = new ApproximateIndex({ maxTreeSize: 1 << 20 });
    const registry = new WorkerRegistry({
      breaker: { failureThreshold: 5, openMs: 1000, successThreshold: 1 },
      connectTimeoutMs: 1000,
    });
    followWorkers(index, registry);
    const worker = registry.add("http://127.0.0.1:40001");
    index.insert(worker.id, undefined, "hello world");
    expect(index.size(worker.id)).toBe("hello world".length);
    expect(worker.indexedChars()).toBe("hello world".length);
    const out: number[] = [];
    index.match("hello world", undefined, [worker], out);
    expect(out).toEqual(["hello world".length]);
    registry.remove(worker.id);
    expect(index.size(worker.id)).toBe(0);
    await registry.close();
  });
});
