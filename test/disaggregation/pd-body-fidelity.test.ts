import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startSimWorker } from "../../sim/worker.js";
import { MAX_PD_BATCH_ITEMS } from "../../src/disaggregation/pd-body.js";
import { postJson } from "../helpers/router.js";
import { type PdFleet, startPdFleet, totalRequests } from "./pd-fleet.js";

const MODEL = "meta-llama/Llama-3.1-8B-Instruct";

/** A value nested `depth` arrays deep, as JSON text (parsed without recursion, stringified with). */
function nestedText(depth: number): string {
  return `${"[".repeat(depth)}${"]".repeat(depth)}`;
}

function chatText(extra: string): string {
  return `{"model":"${MODEL}","messages":[{"role":"user","content":"hi"}],"max_tokens":3${extra}}`;
}

async function errorOf(res: Response): Promise<{ message: string; code: string }> {
  const body = (await res.json()) as { error: { message: string; code: string } };
  return body.error;
}

describe("PD bodies the engines refuse, or that would make the router build large ones", () => {
  for (const flavor of ["sglang", "vllm"] as const) {
    describe(flavor, () => {
      let fleet: PdFleet;
      beforeAll(async () => {
        fleet = await startPdFleet(flavor, { prefill: 1, decode: 1 });
      });
      afterAll(async () => {
        await fleet.close();
      });
      const workers = () => [...fleet.prefill, ...fleet.decode];

      it(`regression: "n": 1000000 is refused with 400 naming n, before either side's body is built`, async () => {
        const before = totalRequests(workers());
        const res = await postJson(
          `${fleet.router.url}/v1/chat/completions`,
          chatText(',"n":1000000'),
        );
        expect(res.status).toBe(400);
        const error = await errorOf(res);
        expect(error.code).toBe("invalid_request");
        expect(error.message).toContain('"n" must be at most 16384, got 1000000');
        expect(totalRequests(workers())).toBe(before);
        // The router still answers.
        expect((await fetch(`${fleet.router.url}/health`)).status).toBe(200);
      });

      it("regression: a field nested 900 deep is 400 naming the field, not a 500 from JSON.stringify", async () => {
        // Client bootstrap_* fields make SGLang's body be serialized again; vLLM's always is.
        // Deeper than the PD bound, within the intake's (a body past MAX_BODY_NESTING is refused
        // from its bytes before this check is reached).
        const extra = `,"bootstrap_room":7,"bootstrap_host":"x","metadata":${nestedText(900)}`;
        const res = await postJson(`${fleet.router.url}/v1/chat/completions`, chatText(extra));
        expect(res.status).toBe(400);
        expect((await errorOf(res)).message).toContain('"metadata" is nested deeper than 128');
      });

      it("a body nested within the bound still reaches both sides", async () => {
        const res = await postJson(
          `${fleet.router.url}/v1/chat/completions`,
          chatText(`,"bootstrap_room":7,"metadata":${nestedText(100)}`),
        );
        expect(res.status).toBe(200);
      });
    });
  }

  describe("vLLM", () => {
    let fleet: PdFleet;
    beforeAll(async () => {
      fleet = await startPdFleet("vllm", { prefill: 1, decode: 1 });
    });
    afterAll(async () => {
      await fleet.close();
    });

    it("regression: min_tokens reaches the decode side only (vLLM refuses it above the prefill's max_tokens 1)", async () => {
      for (const field of ["min_tokens", "min_completion_tokens"]) {
        const res = await postJson(`${fleet.router.url}/v1/chat/completions`, {
          model: MODEL,
          messages: [{ role: "user", content: `at least three, ${field}` }],
          max_tokens: 5,
          [field]: 3,
        });
        expect(res.status).toBe(200);
        const body = (await res.json()) as { usage: { completion_tokens: number } };
        expect(body.usage.completion_tokens).toBe(5);
      }
      // The decode side still refuses what vLLM refuses: min_tokens above max_tokens.
      const res = await postJson(`${fleet.router.url}/v1/completions`, {
        model: MODEL,
        prompt: "too few",
        max_tokens: 2,
        min_tokens: 3,
      });
      expect(res.status).toBe(400);
      expect((await errorOf(res)).message).toBe(
        "min_tokens must be less than or equal to max_tokens=2, got 3.",
      );
    });

    it("regression: a completions prompt list is refused with 400 naming prompt (vLLM hands over the first prompt's KV only)", async () => {
      const before = totalRequests([...fleet.prefill, ...fleet.decode]);
      const res = await postJson(`${fleet.router.url}/v1/completions`, {
        model: MODEL,
        prompt: ["first prompt", "second prompt"],
        max_tokens: 2,
      });
      expect(res.status).toBe(400);
      expect((await errorOf(res)).message).toMatch(
        /^"prompt" is a list of 2 prompts; .*one request per prompt/,
      );
      expect(totalRequests([...fleet.prefill, ...fleet.decode])).toBe(before);
      // One prompt in a list, or a list of token ids, is one prompt.
      for (const prompt of [["only prompt"], [1, 2, 3, 4]]) {
        const one = await postJson(`${fleet.router.url}/v1/completions`, {
          model: MODEL,
          prompt,
          max_tokens: 2,
        });
        expect(one.status).toBe(200);
      }
    });
  });

  describe("SGLang", () => {
    let fleet: PdFleet;
    beforeAll(async () => {
      fleet = await startPdFleet("sglang", { prefill: 1, decode: 1 });
    });
    afterAll(async () => {
      await fleet.close();
    });

    it("regression: a prompt list longer than the bound is refused naming prompt; /generate's text and input_ids too", async () => {
      const items = MAX_PD_BATCH_ITEMS + 1;
      const cases: [string, Record<string, unknown>, string][] = [
        ["/v1/completions", { prompt: Array(items).fill("a") }, "prompt"],
        ["/generate", { text: Array(items).fill("a") }, "text"],
        ["/generate", { input_ids: Array(items).fill([1]) }, "input_ids"],
      ];
      for (const [path, body, field] of cases) {
        const res = await postJson(`${fleet.router.url}${path}`, body);
        expect(res.status).toBe(400);
        expect((await errorOf(res)).message).toBe(
          `"${field}" has ${items} items; a prefill/decode pair takes at most ${MAX_PD_BATCH_ITEMS} in one request.`,
        );
      }
      // A batch within the bound gets one room per item.
      const res = await postJson(`${fleet.router.url}/v1/completions`, {
        prompt: ["one", "two"],
        max_tokens: 2,
      });
      expect(res.status).toBe(200);
      expect(((await res.json()) as { choices: unknown[] }).choices).toHaveLength(2);
    });
  });
});

describe("the simulators refuse a minimum output above the maximum, as the engines do", () => {
  it("vLLM's min_tokens and SGLang's min_new_tokens", async () => {
    const vllm = await startSimWorker({ flavor: "vllm", timeScale: 0 });
    const sglang = await startSimWorker({ flavor: "sglang", timeScale: 0 });
    try {
      const v = await postJson(`${vllm.url}/v1/chat/completions`, {
        messages: [{ role: "user", content: "hi" }],
        max_tokens: 1,
        min_tokens: 4,
      });
      expect(v.status).toBe(400);
      expect(JSON.stringify(await v.json())).toContain(
        "min_tokens must be less than or equal to max_tokens=1, got 4.",
      );
      const s = await postJson(`${sglang.url}/generate`, {
        text: "hi",
        sampling_params: { max_new_tokens: 2, min_new_tokens: 3 },
      });
      expect(s.status).toBe(400);
      expect(JSON.stringify(await s.json())).toContain(
        "min_new_tokens must be in [0, max_new_tokens(2)], got 3.",
      );
    } finally {
      await Promise.all([vllm.close(), sglang.close()]);
    }
  });
});
