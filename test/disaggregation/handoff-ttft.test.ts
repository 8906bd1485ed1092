import { afterEach, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import type { RunningRouter } from "../../src/server.js";
import { postJson, startTestRouter } from "../helpers/router.js";

/** KV transfer speed of the simulated pair: a 2000-token prompt takes 400 ms to hand off. */
const TRANSFER_TOKENS_PER_SEC = 5000;
const PROMPT = "word ".repeat(1600); // 8000 characters, 2000 simulated tokens
const TRANSFER_MS = (2000 * 1000) / TRANSFER_TOKENS_PER_SEC;

describe("issue 25: the simulator's time to first token counts the hand-off (PD, both engines)", () => {
  let router: RunningRouter | undefined;
  const sims: SimWorker[] = [];
  afterEach(async () => {
    await router?.stop(100);
    router = undefined;
    await Promise.all(sims.splice(0).map((s) => s.close()));
  });

  for (const flavor of ["sglang", "vllm"] as const) {
    it(`${flavor}: the first streamed byte comes no sooner than the KV transfer allows`, async () => {
      const common = { flavor, timeScale: 1, transferTokensPerSec: TRANSFER_TOKENS_PER_SEC };
      const prefill = await startSimWorker({ ...common, id: "p1", role: "prefill" });
      const decode = await startSimWorker({ ...common, id: "d1", role: "decode" });
      sims.push(prefill, decode);
      router = await startTestRouter({
        ...(flavor === "sglang" ? { pdDisaggregation: true } : { vllmPdDisaggregation: true }),
        prefill: [{ url: prefill.url, bootstrapPort: prefill.bootstrapPort ?? null }],
        decode: [decode.url],
      });
      const started = performance.now();
      const res = await postJson(`${router.url}/v1/completions`, {
        prompt: PROMPT,
        max_tokens: 2,
        stream: true,
      });
      expect(res.status).toBe(200);
      const reader = res.body!.getReader();
      const first = await reader.read();
      const ttft = performance.now() - started;
      expect(first.done).toBe(false);
      while (!(await reader.read()).done) {}
      // A lower bound only (a loaded machine makes it later, never sooner): the decode worker's
      // first token waited for the prefill and then the transfer of the prompt's KV.
      expect(ttft).toBeGreaterThanOrEqual(TRANSFER_MS * 0.9);
      expect(decode.stats().cachedTokens).toBeGreaterThan(0);
    });
  }
});
