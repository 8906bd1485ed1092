import { describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import type { BlockHashIndex } from "../../src/index/block-hash-index.js";
import { postChat, postJson, startTestRouter, waitFor } from "../helpers/router.js";
import { simsBehindRouter } from "../helpers/sim-behind-router.js";

const SYSTEM = "You answer questions about chained block hashes, briefly. ".repeat(30);

describe("--prefix-index block_hash", () => {
  const fleet = simsBehindRouter(3, "b", {
    prefixIndex: "block_hash",
    blockHashChars: 128,
    blockHashCapacity: 1000,
  });

  const ask = async (question: string): Promise<Response> => {
    const res = await postChat(fleet.router, SYSTEM, question);
    await res.arrayBuffer();
    return res;
  };

  const workerOf = (res: Response): SimWorker => {
    const id = res.headers.get("x-radixgate-worker")!;
    const url = fleet.router.context.registry.get(id)?.url;
    const worker = fleet.workers.find((w) => w.url === url);
    if (worker === undefined) throw new Error(`no worker ${id}`);
    return worker;
  };

  it("routes a shared long prefix to one worker, in whole blocks, and names the index", async () => {
    const index = fleet.router.context.index as BlockHashIndex;
    expect(index.name).toBe("block_hash");
    expect(index.blockChars).toBe(128);
    const served = new Set<string | null>();
    for (let i = 0; i < 6; i++) {
      const res = await ask(`Question ${i}?`);
      expect(res.status).toBe(200);
      served.add(res.headers.get("x-radixgate-worker"));
      if (i > 0)
        expect(res.headers.get("x-radixgate-route")).toMatch(/^cache_hit;.*index=block_hash/);
    }
    expect(served.size).toBe(1);
    const [id] = served;
    const held = fleet.router.context.index.size(id!);
    expect(held).toBeGreaterThan(SYSTEM.length - 128);
    expect(held % 128).toBe(0);
  });

  it("forgets the blocks a worker did not accept, and learns them where the request went", async () => {
    const first = await ask("Warm-up question?");
    const holder = workerOf(first);
    const holderId = first.headers.get("x-radixgate-worker")!;
    const before = fleet.router.context.index.size(holderId);
    holder.setFaults({ failFirst: 1, failStatus: 503 });
    const question = `A long new question that adds several blocks of its own. ${"detail ".repeat(60)}`;
    const res = await ask(question);
    expect(res.status).toBe(200);
    const servedBy = res.headers.get("x-radixgate-worker")!;
    expect(servedBy).not.toBe(holderId);
    // The holder's claim on the new question's blocks was taken back; the retry's worker holds
    // the whole text in whole blocks.
    expect(fleet.router.context.index.size(holderId)).toBe(before);
    expect(fleet.router.context.index.size(servedBy)).toBeGreaterThan(question.length);
  });
});

describe("--block-hash-chars auto", () => {
  it("sizes blocks from a vLLM worker's cache_config_info block_size (× 4 characters)", async () => {
    const worker = await startSimWorker({
      id: "v1",
      flavor: "vllm",
      model: "m",
      blockSize: 32,
      timeScale: 0,
    });
    const router = await startTestRouter({
      workerUrls: [worker.url],
      prefixIndex: "block_hash",
      enginePollIntervalSecs: 60,
    });
    try {
      const index = router.context.index as BlockHashIndex;
      await waitFor(() => index.blockChars === 128, 5000, "block size learned");
      const res = await postJson(`${router.url}/v1/completions`, {
        model: "m",
        prompt: "p".repeat(300),
        max_tokens: 1,
      });
      await res.arrayBuffer();
      expect(res.status).toBe(200);
      const id = router.context.registry.get(worker.url)!.id;
      expect(router.context.index.size(id)).toBe(256);
    } finally {
      await router.stop(100);
      await worker.close();
    }
  });
});
