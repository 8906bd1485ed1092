import { afterEach, describe, expect, it, vi } from "vitest";
import type { ConfigOverrides } from "../../src/config.js";
import { postJson } from "../helpers/router.js";
import { type PdFleet, startPdFleet, totalRequests } from "./pd-fleet.js";

/** A completion request's text as the client sends it (postJson sends a string as is). */
function completion(prompt: string): string {
  return JSON.stringify({ prompt, max_tokens: 3 });
}

describe("a PD request's body: parsed once, by intake (issue 25's pair forwarder)", () => {
  let fleet: PdFleet | undefined;
  afterEach(async () => {
    vi.restoreAllMocks();
    await fleet?.close();
    fleet = undefined;
  });

  async function send(flavor: "sglang" | "vllm", text: string, overrides: ConfigOverrides = {}) {
    fleet = await startPdFleet(flavor, { prefill: 1, decode: 1 }, overrides);
    const res = await postJson(`${fleet.router.url}/v1/completions`, text);
    expect(res.status).toBe(200);
    const body = (await res.json()) as { choices: unknown[]; usage: { completion_tokens: number } };
    expect(body.choices).toHaveLength(1);
    expect(body.usage.completion_tokens).toBe(3);
  }

  for (const flavor of ["sglang", "vllm"] as const) {
    it(`regression, ${flavor}: the pair takes intake's parsed object; the client's text is parsed once`, async () => {
      const text = completion(`parse me once, ${flavor}`);
      // The simulators run in this process too, but they parse the rewritten bodies, not this text.
      const parse = vi.spyOn(JSON, "parse");
      await send(flavor, text);
      expect(parse.mock.calls.filter(([arg]) => arg === text)).toHaveLength(1);
    });

    it(`${flavor}: a body parsed in a parse worker (over --parse-offload-bytes) still reaches both sides`, async () => {
      await send(flavor, completion(`large ${flavor} `.repeat(200)), {
        parseWorkers: 1,
        parseOffloadBytes: 1024,
      });
      expect(fleet?.router.context.parsePool?.completed).toBe(1);
      // Both sides, as the name says: one request at the prefill worker and one at the decode.
      expect(totalRequests(fleet!.prefill)).toBe(1);
      expect(totalRequests(fleet!.decode)).toBe(1);
    });

    it(`regression, ${flavor}: a body parsed in a parse worker is not parsed again on the event loop`, async () => {
      const text = completion(`large ${flavor} `.repeat(200));
      const parse = vi.spyOn(JSON, "parse");
      await send(flavor, text, { parseWorkers: 1, parseOffloadBytes: 1024 });
      expect(fleet?.router.context.parsePool?.completed).toBe(1);
      expect(parse.mock.calls.filter(([arg]) => arg === text)).toHaveLength(0);
    });

    it(`${flavor}: the pair's refusal comes from the parse worker's parse too (400 naming n)`, async () => {
      fleet = await startPdFleet(
        flavor,
        { prefill: 1, decode: 1 },
        {
          parseWorkers: 1,
          parseOffloadBytes: 1024,
        },
      );
      const text = JSON.stringify({
        messages: [{ role: "user", content: "x".repeat(2000) }],
        n: 1_000_000,
      });
      const res = await postJson(`${fleet.router.url}/v1/chat/completions`, text);
      expect(res.status).toBe(400);
      expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(/"n"/);
      expect(fleet.router.context.parsePool?.completed).toBe(1);
      expect(totalRequests(fleet.prefill) + totalRequests(fleet.decode)).toBe(0);
    });
  }
});
