/**
 * Placement of a request the engines serve before everything this router has in prefill there
 * (--engine-priority on SGLang's priority scheduling): only the prefill under way is ahead of
 * it, so it goes where that ends soonest, not where the least prefill was sent. Real sockets,
 * two simulated SGLang engines slowed 4x so a long prompt's prefill spans a second of real time.
 */
import { describe, expect, it } from "vitest";
import { startSimWorker } from "../../sim/worker.js";
import { startedPerTest } from "../faults/support.js";
import { startTestRouter, waitFor } from "../helpers/router.js";
import { streamCompletion } from "../helpers/streamed-completion.js";

/** A streamed completion at `priority`: resolves at its headers with the worker that serves it. */
function send(
  routerUrl: string,
  prompt: string,
  priority: number,
): Promise<{ worker: string; firstByte: Promise<void>; done: Promise<void> }> {
  return streamCompletion(routerUrl, prompt, 2, { headers: { "x-priority": String(priority) } });
}

/** A prompt of `chars` characters that shares nothing with the others. */
const prompt = (name: string, chars: number) =>
  `${name} ${Math.random().toString(36).slice(2)} `.padEnd(chars, "x");

describe("a request above every priority in prefill goes where the prefill under way ends first", () => {
  const started = startedPerTest();

  it("takes the worker whose older, longer prefill is nearly done over one that just began a shorter one", async () => {
    const engine = {
      flavor: "sglang",
      stepRule: "prefill-first",
      priorityScheduling: true,
      timeScale: 4,
      maxBatchTokens: 2048,
    } as const;
    const sims = [
      await startSimWorker({ ...engine, id: "one" }),
      await startSimWorker({ ...engine, id: "two" }),
    ];
    started.sims = sims;
    started.router = await startTestRouter({
      workerUrls: sims.map((s) => s.url),
      enginePriority: true,
    });
    const router = started.router;
    await router.context.introspection.pollAll();
    const workers = router.context.registry.list();
    await waitFor(() => workers.every((w) => w.engine === "sglang"), 5000, "the engines read");

    // Each worker teaches the router its prefill speed: one long prompt each, at once (the
    // second goes where the first's prefill is not).
    const teach = await Promise.all([send(router.url, prompt("t1", 24_000), -1)]);
    teach.push(await send(router.url, prompt("t2", 24_000), -1));
    expect(new Set(teach.map((t) => t.worker)).size).toBe(2);
    await Promise.all(teach.map((t) => t.done));

    // 48,000 characters (12,000 tokens, 1.6 s here) on one worker; most of it computed when
    // 24,000 fresh characters go to the other (the prefill sent there is half as much).
    const long = await send(router.url, prompt("long", 48_000), -1);
    await new Promise((resolve) => setTimeout(resolve, 1300));
    const short = await send(router.url, prompt("short", 24_000), -1);
    expect(short.worker).not.toBe(long.worker);

    const high = await send(router.url, prompt("high", 400), 10);
    expect(high.worker).toBe(long.worker);
    await Promise.all([long.done, short.done, high.done]);
  });
});
