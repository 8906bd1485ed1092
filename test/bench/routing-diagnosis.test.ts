import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { diagnoseDecisions } from "../../bench/lib/routing-diagnosis.js";
import { writeTinyTokenizer } from "../../sim/tiny-tokenizer.js";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import type { Scheduler } from "../../src/scheduling/scheduler.js";
import type { RunningRouter } from "../../src/server.js";
import { postJson, startTestRouter } from "../helpers/router.js";

let sims: SimWorker[];
let router: RunningRouter;

beforeAll(async () => {
  const tokenizerPath = writeTinyTokenizer();
  sims = [
    await startSimWorker({ timeScale: 0, tokenizerPath }),
    await startSimWorker({ timeScale: 0, tokenizerPath }),
  ];
  router = await startTestRouter({ workerUrls: sims.map((s) => s.url), policy: "round_robin" });
});
afterAll(async () => {
  await router?.stop(0);
  await Promise.all(sims.map((s) => s.close()));
});

describe("bench:routing --diagnose", () => {
  it("counts what the engines hold in their own tokens (a fleet started with a tokenizer.json)", async () => {
    const prompt = "the line on the left, then another line on the right. ".repeat(12);
    // Only the first worker holds the prompt.
    const res = await postJson(`${sims[0]!.url}/v1/completions`, { prompt, max_tokens: 1 });
    expect(res.status).toBe(200);
    await res.text();
    const held = sims[0]!.cachedPrefixTokens(sims[0]!.tokenizeBody({ prompt })!);
    expect(held).toBeGreaterThan(0);

    const tally = diagnoseDecisions(router, sims);
    const decider = (router.context.forwarder as unknown as { decider: Scheduler }).decider;
    const workers = router.context.registry.list();
    const request = { text: prompt, tokenizeInput: { prompt } };
    // round_robin: one decision goes to each worker, so one of the two misses the holder.
    decider.decide(workers, request);
    decider.decide(workers, request);
    expect(tally.decisions).toBe(2);
    expect(tally.bestHolderChosen).toBe(1);
    expect(tally.lost.tokenize_miss).toEqual({ decisions: 1, tokens: held });
  });
});
