import { describe, expect, it } from "vitest";
import { startSimWorker } from "../../sim/worker.js";
import { chat, deadUrl, startedPerTest, startLoggedRouter } from "./support.js";

/**
 * Regression: "trees learn from failures". The routing text used to go into a worker's tree even
 * when that worker then refused the request, so junk (e.g. three rejected 60 MB prompts) pushed
 * every real prefix out. Only what a worker accepted (a 2xx) may stay in its prefix index.
 */
describe("the prefix index learns only from accepted requests", () => {
  const started = startedPerTest();
  const PROMPT = "Summarise the following contract in three bullet points, please. ".repeat(4);

  it("a worker that answers 4xx keeps nothing of the refused text", async () => {
    started.sims = [await startSimWorker({ id: "refuses", timeScale: 0, faults: { status: 413 } })];
    const { router } = await startLoggedRouter({ workerUrls: [started.sims[0]!.url] });
    started.router = router;
    const res = await chat(router.url, PROMPT);
    expect(res.status).toBe(413);
    await res.arrayBuffer();
    const worker = router.context.registry.list()[0]!;
    expect(router.context.index.size(worker.id)).toBe(0);
  });

  it("a worker whose 5xx was retried elsewhere keeps nothing; the worker that served keeps the text", async () => {
    started.sims = await Promise.all([
      startSimWorker({ id: "failing", timeScale: 0, faults: { status: 503 } }),
      startSimWorker({ id: "fine", timeScale: 0 }),
    ]);
    const { router } = await startLoggedRouter({
      workerUrls: started.sims.map((s) => s.url),
      policy: "cache_aware",
    });
    started.router = router;
    const [failing, fine] = router.context.registry.list();
    // Both are idle: load ties rotate, so send until the failing worker has been tried once.
    for (let i = 0; i < 4; i++) {
      const res = await chat(router.url, `${PROMPT} variant ${i}`);
      expect(res.status).toBe(200);
      await res.arrayBuffer();
    }
    expect(started.sims[0]!.stats().requests).toBeGreaterThan(0);
    expect(router.context.index.size(failing!.id)).toBe(0);
    expect(router.context.index.size(fine!.id)).toBeGreaterThan(PROMPT.length);
  });

  it("a refused connection leaves nothing in the dead worker's index", async () => {
    const dead = await deadUrl();
    started.sims = [await startSimWorker({ id: "live", timeScale: 0 })];
    const { router } = await startLoggedRouter({
      workerUrls: [dead, started.sims[0]!.url],
      policy: "cache_aware",
    });
    started.router = router;
    for (let i = 0; i < 3; i++) {
      const res = await chat(router.url, `${PROMPT} ${i}`);
      expect(res.status).toBe(200);
      await res.arrayBuffer();
    }
    const deadWorker = router.context.registry.get(dead)!;
    expect(router.context.index.size(deadWorker.id)).toBe(0);
  });
});
