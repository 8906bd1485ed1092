import { afterEach, describe, expect, it } from "vitest";
import { tokenize } from "../../sim/tokenizer.js";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import type { EventBatch } from "../../src/kv-events/events.js";
import { KvEventSubscriber, type KvSubscriberOptions } from "../../src/kv-events/subscriber.js";
import { post, waitFor } from "../sim/http-helpers.js";

const open: { close(): unknown }[] = [];
afterEach(async () => {
  for (const x of open.splice(0)) await x.close();
});

async function sim(options: { encoding: "array" | "map"; noReplay?: boolean }) {
  const worker = await startSimWorker({ timeScale: 0, blockSize: 4, kvEvents: options });
  open.push(worker);
  return worker;
}

function subscribe(worker: SimWorker, extra: Partial<KvSubscriberOptions> = {}) {
  const seen = {
    batches: [] as EventBatch[],
    resets: [] as string[],
    replays: [] as string[],
    refused: [] as number[],
    malformed: 0,
    /** Batches applied before the last reset. */
    resetAt: undefined as number | undefined,
  };
  const subscriber = new KvEventSubscriber({
    endpoint: worker.kvEvents!.endpoint,
    replayEndpoint: worker.kvEvents!.replayEndpoint,
    replayTimeoutMs: 5000,
    rebuildMs: 60_000,
    reconnectMinMs: 50,
    reconnectMaxMs: 500,
    maxMessageBytes: 1 << 20,
    onBatch: (b) => seen.batches.push(b),
    onReset: (r) => {
      seen.resets.push(r);
      seen.resetAt = seen.batches.length;
    },
    onReplay: (o) => seen.replays.push(o),
    onMalformed: () => seen.malformed++,
    onRefused: (reason, _batches, bytes) => seen.refused.push(reason === "too_large" ? bytes : -1),
    ...extra,
  });
  subscriber.start();
  open.push(subscriber);
  return { subscriber, seen };
}

const stored = (seen: { batches: EventBatch[] }) =>
  seen.batches.flatMap((b) => b.events).filter((e) => e.type === "BlockStored");

async function complete(worker: SimWorker, prompt: string) {
  const res = await post(worker.url, "/v1/completions", { prompt, max_tokens: 1 });
  expect(res.status).toBe(200);
  await res.text();
}

describe("KvEventSubscriber against the simulator's real ZMQ publisher", () => {
  it.each(["array", "map"] as const)(
    "receives BlockStored with the prompt's tokens (%s encoding)",
    async (encoding) => {
      const worker = await sim({ encoding });
      const { subscriber, seen } = subscribe(worker);
      await waitFor(() => subscriber.live);
      const prompt = "abcdefgh".repeat(8);
      await complete(worker, prompt);
      await waitFor(() => stored(seen).length > 0);
      const tokens = stored(seen).flatMap((e) => (e.type === "BlockStored" ? e.tokenIds : []));
      expect(tokens).toEqual(tokenize(prompt).slice(0, tokens.length));
      expect(tokens.length).toBeGreaterThanOrEqual(8);
      expect(seen.malformed).toBe(0);
    },
  );

  it("a fresh subscriber replays what the engine buffered; batches published during the replay wait and are applied after it, in order, once", async () => {
    const worker = await sim({ encoding: "map" });
    const prompts = ["alpha", "bravo", "charlie", "delta", "echo"].map(
      (w) => `${w} prompt, long enough for several blocks`,
    );
    // Published before anyone subscribed: only the replay buffer has them.
    for (const p of prompts.slice(0, 3)) await complete(worker, p);
    const release = worker.kvEvents!.holdReplays();
    const { subscriber, seen } = subscribe(worker);
    await waitFor(() => worker.kvEvents!.replayRequests > 0);
    // Live while the replay is held: they reach the subscriber's socket first.
    for (const p of prompts.slice(3)) await complete(worker, p);
    expect(seen.batches).toEqual([]);
    release();
    await waitFor(() => seen.batches.length >= worker.kvEvents!.batches);
    expect(seen.batches.length).toBe(worker.kvEvents!.batches);
    const firstBlocks = stored(seen).map((e) =>
      e.type === "BlockStored" ? e.tokenIds.slice(0, 4) : [],
    );
    const expected = prompts.map((p) => tokenize(p).slice(0, 4));
    expect(firstBlocks.filter((b) => expected.some((x) => x.join() === b.join()))).toEqual(
      expected,
    );
    expect(seen.resets).toEqual([]);
    expect(subscriber.state).toBe("live");
  });

  it("fills a dropped message from the replay endpoint, without a reset", async () => {
    const worker = await sim({ encoding: "map" });
    const { subscriber, seen } = subscribe(worker);
    await waitFor(() => subscriber.live);
    worker.kvEvents!.dropNext(1);
    await complete(worker, "first prompt, long enough for blocks");
    await complete(worker, "second prompt, long enough for blocks");
    await waitFor(() => seen.batches.length >= 2);
    expect(worker.kvEvents!.batches).toBe(seen.batches.length);
    expect(seen.replays).toContain("complete");
    expect(seen.resets).toEqual([]);
    expect(subscriber.state).toBe("live");
  });

  it("without replay, a dropped message resets the worker and it rebuilds", async () => {
    const worker = await sim({ encoding: "array", noReplay: true });
    const { subscriber, seen } = subscribe(worker, { rebuildMs: 0 });
    await waitFor(() => subscriber.live);
    // A PUB socket drops what it sends before the subscription has reached it (ZMQ's slow
    // joiner), and without replay nothing brings it back: send until one batch arrives.
    for (let i = 0; seen.batches.length === 0; i++) {
      if (i === 100) throw new Error("no batch arrived");
      await complete(worker, `warm up prompt ${i}, long enough for blocks`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    worker.kvEvents!.dropNext(1);
    await complete(worker, "lost prompt, long enough for blocks!!");
    await complete(worker, "third prompt, long enough for blocks!");
    await waitFor(() => seen.resets.length > 0);
    expect(seen.resets).toEqual(["gap"]);
    expect(seen.replays).toContain("unavailable");
    expect(subscriber.live).toBe(true); // rebuildMs 0: back at once
  });

  it("a sequence that starts again (engine restart) resets the worker", async () => {
    const worker = await sim({ encoding: "array" });
    const { subscriber, seen } = subscribe(worker);
    await waitFor(() => subscriber.live);
    await complete(worker, "before the restart, long enough");
    await complete(worker, "before the restart, another one");
    await waitFor(() => seen.batches.length >= 2);
    worker.clearKvCache({ restart: true });
    await complete(worker, "after the restart, long enough!!");
    await waitFor(() => seen.resets.length > 0);
    expect(seen.resets).toEqual(["sequence_reset"]);
  });

  // Issue 20: a 48 MB batch of 4M blocks was decoded and applied whole, wedging the router.
  it("refuses a batch over maxMessageBytes undecoded and counts it; the worker rebuilds", async () => {
    const worker = await sim({ encoding: "map" });
    const { subscriber, seen } = subscribe(worker, { maxMessageBytes: 4096 });
    await waitFor(() => subscriber.live);
    // Past ZMQ's slow joiner: a first small batch has arrived.
    for (let i = 0; stored(seen).length === 0; i++) {
      if (i === 100) throw new Error("no batch arrived");
      worker.kvEvents!.stored([i + 1], null, [1, 2, 3, 4]);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    seen.batches.length = 0;
    const n = 2000; // 2,000 blocks of 4 tokens: some 14 KB
    const hashes = Array.from({ length: n }, (_, i) => 1000 + i);
    worker.kvEvents!.stored(
      hashes,
      null,
      Array.from({ length: n * 4 }, (_, i) => i % 100),
    );
    await waitFor(() => seen.refused.length > 0);
    expect(seen.refused[0]).toBeGreaterThan(4096);
    expect(seen.resets).toEqual(["too_large"]);
    expect(stored(seen)).toEqual([]);
    expect(subscriber.state).toBe("rebuilding");
    // The stream goes on: the next batch, in sequence, is applied.
    worker.kvEvents!.stored([900], null, [1, 2, 3, 4]);
    await waitFor(() => stored(seen).length > 0);
    expect(seen.malformed).toBe(0);
  });

  // Issue 20: 200k events/s for 10 s were queued without limit and wedged the router.
  it("sheds a publisher it stays behind for MAX_BEHIND_MS: drops its messages unread, resets, rebuilds", async () => {
    const worker = await sim({ encoding: "map" });
    // A router that needs 100 ms per batch: behind a publisher that sends 40 at once.
    const { subscriber, seen } = subscribe(worker, {
      caughtUp: () => new Promise((resolve) => setTimeout(resolve, 100)),
    });
    await waitFor(() => subscriber.live);
    for (let i = 0; stored(seen).length === 0; i++) {
      if (i === 100) throw new Error("no batch arrived");
      worker.kvEvents!.stored([i + 1], null, [1, 2, 3, 4]);
      await new Promise((resolve) => setTimeout(resolve, 150));
    }
    const applied = seen.batches.length;
    for (let i = 0; i < 40; i++) {
      worker.kvEvents!.stored([1000 + i], null, [1, 2, 3, 4]);
      await new Promise((resolve) => setImmediate(resolve)); // one batch each
    }
    await waitFor(() => seen.resets.includes("overload"), 10_000);
    expect(seen.refused.filter((r) => r === -1).length).toBeGreaterThan(0);
    expect(subscriber.state).toBe("rebuilding");
    // Behind for 500 ms at 100 ms a batch: some were applied, the rest dropped unread.
    expect(seen.batches.length - applied).toBeGreaterThanOrEqual(4);
    expect(seen.batches.length - applied).toBeLessThan(40);
    expect(seen.replays.filter((r) => r !== "complete")).toEqual([]);
  });

  it("a rebuild asked for during a shed hold does not end the hold's rebuilding early", async () => {
    const worker = await sim({ encoding: "map" });
    // Rebuilds of 50 ms: far shorter than the 10 s hold (SHED_HOLD_MS) after a shed.
    const { subscriber, seen } = subscribe(worker, {
      rebuildMs: 50,
      caughtUp: () => new Promise((resolve) => setTimeout(resolve, 100)),
    });
    await waitFor(() => subscriber.live);
    for (let i = 0; stored(seen).length === 0; i++) {
      if (i === 100) throw new Error("no batch arrived");
      worker.kvEvents!.stored([i + 1], null, [1, 2, 3, 4]);
      await new Promise((resolve) => setTimeout(resolve, 150));
    }
    for (let i = 0; i < 40; i++) {
      worker.kvEvents!.stored([1000 + i], null, [1, 2, 3, 4]);
      await new Promise((resolve) => setImmediate(resolve));
    }
    await waitFor(() => seen.resets.includes("overload"), 10_000);
    // The manager sheds its own backlog this way (a replay's batches did not fit): a short
    // rebuild from now must not cut the hold's, while the stream's messages are still dropped.
    subscriber.rebuild();
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(subscriber.state).toBe("rebuilding");
  });

  it("a sequence that starts again replays the new stream from its start (the first batch was lost)", async () => {
    const worker = await sim({ encoding: "map" });
    const { subscriber, seen } = subscribe(worker);
    await waitFor(() => subscriber.live);
    for (let i = 0; i < 3; i++) await complete(worker, `before the restart ${i}, long enough`);
    await waitFor(() => seen.batches.length >= 3);
    worker.clearKvCache({ restart: true });
    worker.kvEvents!.dropNext(1); // batch 0 of the new stream never reaches the SUB socket
    const prompt = "first prompt of the new engine";
    await complete(worker, prompt);
    await complete(worker, "second prompt of the new engine!");
    await waitFor(() => seen.resets.length > 0);
    await waitFor(() => tokensSinceReset(seen).length >= 8);
    expect(seen.resets).toEqual(["sequence_reset"]);
    expect(tokensSinceReset(seen).slice(0, 8)).toEqual(tokenize(prompt).slice(0, 8));
  });

  it.each([
    ["many batches before", 3, 2],
    ["one batch before, so the new numbers overlap the old", 1, 3],
  ])(
    "an engine that restarted while disconnected is reset and replayed from 0 (%s)",
    async (_name, before, after) => {
      const worker = await sim({ encoding: "array" });
      const { subscriber, seen } = subscribe(worker);
      await waitFor(() => subscriber.live);
      for (let i = 0; i < before; i++)
        await complete(worker, `old engine prompt ${i}, long enough`);
      await waitFor(() => seen.batches.length >= before);
      const publisher = worker.kvEvents!;
      await publisher.stop();
      await waitFor(() => subscriber.state === "disconnected");
      worker.clearKvCache({ restart: true });
      const prompts = Array.from(
        { length: after },
        (_, i) => `new engine prompt ${i}, long enough`,
      );
      for (const p of prompts) await complete(worker, p);
      await waitFor(() => publisher.batches === before + after);
      await publisher.rebind();
      await waitFor(() => subscriber.live && seen.resets.length > 0);
      await waitFor(() => tokensSinceReset(seen).length >= 8);
      expect(seen.resets).toEqual(["sequence_reset"]);
      expect(tokensSinceReset(seen).slice(0, 8)).toEqual(tokenize(prompts[0]!).slice(0, 8));
    },
  );

  it("a reconnection to the same engine resumes without a reset", async () => {
    const worker = await sim({ encoding: "map" });
    const { subscriber, seen } = subscribe(worker);
    await waitFor(() => subscriber.live);
    await complete(worker, "before the blip, long enough for blocks");
    await waitFor(() => seen.batches.length >= 1);
    const publisher = worker.kvEvents!;
    await publisher.stop();
    await waitFor(() => subscriber.state === "disconnected");
    await complete(worker, "during the blip, long enough for blocks");
    await waitFor(() => publisher.batches === 2);
    await publisher.rebind();
    await waitFor(() => subscriber.live && seen.batches.length >= 2);
    expect(seen.resets).toEqual([]);
    expect(seen.batches.length).toBe(publisher.batches);
  });
});

/** Tokens of the BlockStored events applied since the last reset (the new engine's stream). */
function tokensSinceReset(seen: { batches: EventBatch[]; resetAt?: number }): number[] {
  const from = seen.resetAt ?? 0;
  return seen.batches
    .slice(from)
    .flatMap((b) => b.events)
    .flatMap((e) => (e.type === "BlockStored" ? e.tokenIds : []));
}
