import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { afterAll, describe, expect, it } from "vitest";
import { Publisher } from "zeromq";
import { encodeBatch } from "../../sim/kv-event-encoder.js";
import { HashList } from "../../src/index/hash-list.js";
import { PreciseIndex } from "../../src/index/precise-index.js";
import { encodeSequence } from "../../src/kv-events/decode.js";
import { EventApplier } from "../../src/kv-events/event-applier.js";
import type { EventBatch } from "../../src/kv-events/events.js";
import { KvEventSubscriber } from "../../src/kv-events/subscriber.js";
import { TurnBudget } from "../../src/kv-events/turn-budget.js";
import { waitFor } from "../sim/http-helpers.js";

// A full collection on demand, to weigh what stays alive (the flag is put back after the file).
setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;
afterAll(() => setFlagsFromString("--no-expose-gc"));

const LIMIT = 100_000;
const BLOCKS = 120_000;

/** One BlockStored of n 1-token blocks with 64-bit hashes from `base` on (as the fault bench's). */
function batch(n: number, base: bigint): Uint8Array {
  return encodeBatch(
    {
      ts: 1,
      events: [
        {
          type: "BlockStored",
          blockHashes: Array.from({ length: n }, (_, i) => base + BigInt(i)),
          parentHash: null,
          tokenIds: Array.from({ length: n }, (_, i) => 1000 + (i % 30_000)),
          blockSize: 1,
          medium: "GPU",
        },
      ],
    },
    "array",
  );
}

describe("a KV-event batch of 120k blocks, over a real ZMQ socket", () => {
  // A 3.9 MB batch of 330k blocks stalled /health for 300 ms: its hashes were 330k BigInts, then
  // 330k strings, then Map entries with a string and boxed numbers each, all young and alive
  // across the turns of a sliced decode and apply, copied by every scavenge. Packed (typed arrays
  // outside the JS heap), the index's blocks weigh nothing on the heap the GC walks.
  it("is decoded and applied without a heap object per block", async () => {
    const pub = new Publisher({ linger: 0 });
    await pub.bind("tcp://127.0.0.1:*");
    const index = new PreciseIndex({ maxBlocksPerWorker: LIMIT, speculativeTtlMs: 1000 });
    index.addWorker("w");
    const budget = new TurnBudget(20);
    const applier = new EventApplier({
      budget,
      maxPendingBlocks: LIMIT,
      apply: (event) => index.apply("w", event),
    });
    const batches: EventBatch[] = [];
    const subscriber = new KvEventSubscriber({
      endpoint: pub.lastEndpoint!,
      replayEndpoint: undefined,
      replayTimeoutMs: 1000,
      rebuildMs: 0,
      reconnectMinMs: 50,
      reconnectMaxMs: 500,
      maxMessageBytes: 4 * 1024 * 1024,
      budget,
      caughtUp: () => applier.caughtUp(),
      onBatch: (b) => {
        batches.push(b);
        applier.push(b.events);
      },
      onReset: () => {},
      onMalformed: (error) => {
        throw error;
      },
      onReplay: () => {},
    });
    subscriber.start();
    try {
      // ZMQ drops what is published before the subscription reaches the publisher: a small
      // batch until one arrives.
      let seq = 0n;
      for (let tries = 0; batches.length === 0; tries++) {
        if (tries > 500) throw new Error("the subscriber never received a batch");
        await pub.send(["", encodeSequence(seq++), batch(1, 1n)]);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      const payload = batch(BLOCKS, 1n << 40n);
      await waitFor(() => applier.pendingBlocks === 0);
      batches.length = 0;
      gc();
      const before = process.memoryUsage().heapUsed;
      await pub.send(["", encodeSequence(seq++), payload]);
      await waitFor(() => batches.length === 1 && applier.pendingBlocks === 0, 60_000);
      const event = batches[0]!.events[0]!;
      expect(event.type === "BlockStored" && event.blockHashes).toBeInstanceOf(HashList);
      batches.length = 0;
      expect(index.blockCount("w")).toBe(LIMIT);
      gc();
      const grown = process.memoryUsage().heapUsed - before;
      // Strings and Map entries came to about 100 bytes a block on the heap (12 MB here).
      expect(grown).toBeLessThan(LIMIT * 20);
    } finally {
      subscriber.close();
      pub.close();
    }
  }, 90_000);
});
