/**
 * A tenant quota over a prefill/decode fleet (issue 24 follow-up): the request is charged what
 * the decode side's engine reported (prompt and completion tokens), not the router's estimate.
 * Regression: the pair's outcome carried no usage, so every PD request was charged its prompt
 * estimated from characters plus max_tokens.
 */
import { afterEach, describe, expect, it } from "vitest";
import { metric } from "../faults/support.js";
import { postJson, waitFor } from "../helpers/router.js";
import { quotaFile } from "../helpers/tenant-request.js";
import { events, type PdFleet, startPdFleet } from "./pd-fleet.js";

const QUOTA = "tenants:\n  t:\n    tokens_per_minute: 100000\n    concurrent_requests: 8\n";

/**
 * 150 lines of "a\n": 300 characters the router estimates at 75 tokens (4 per token), which the
 * simulator's tokenizer (a token per line at most) counts as 150.
 */
const PROMPT = "a\n".repeat(150);

const used = (fleet: PdFleet, limit: string) =>
  metric(fleet.router.url, "radixgate_tenant_quota_usage", { tenant: "t", limit });

describe("a PD request under a tenant quota is charged the engine's reported tokens", () => {
  let fleet: PdFleet | undefined;
  afterEach(async () => {
    await fleet?.close();
    fleet = undefined;
  });

  for (const flavor of ["sglang", "vllm"] as const) {
    for (const stream of [false, true]) {
      it(`${flavor}, ${stream ? "streamed with include_usage" : "not streamed"}`, async () => {
        fleet = await startPdFleet(
          flavor,
          { prefill: 1, decode: 1 },
          { tenantQuota: quotaFile(QUOTA) },
        );
        const res = await postJson(
          `${fleet.router.url}/v1/completions`,
          {
            model: flavor === "vllm" ? "meta-llama/Llama-3.1-8B-Instruct" : "m",
            prompt: PROMPT,
            max_tokens: 7,
            stream,
            ...(stream ? { stream_options: { include_usage: true } } : {}),
          },
          { "x-tenant-id": "t" },
        );
        expect(res.status).toBe(200);
        const text = await res.text();
        const last = stream
          ? events(text).filter((e) => e.includes('"usage"') && e.includes('"prompt_tokens"'))
          : [text];
        const { usage } = JSON.parse(last.at(-1) ?? "{}") as {
          usage: { prompt_tokens: number; completion_tokens: number };
        };
        expect(usage.prompt_tokens).toBe(150);
        expect(usage.completion_tokens).toBe(7);
        // The request ended (its concurrency place given back): its charge is settled.
        await waitFor(async () => (await used(fleet!, "concurrent_requests")) === 0, 5000);
        expect(await used(fleet, "tokens_per_minute")).toBe(
          usage.prompt_tokens + usage.completion_tokens,
        );
      });
    }
  }
});
