import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import { tenantSalt } from "../../src/intake/cache-salt.js";
import type { RunningRouter } from "../../src/server.js";
import { type PdFleet, startPdFleet } from "../disaggregation/pd-fleet.js";
import { postJson, startTestRouter } from "../helpers/router.js";

/** The model the prefill/decode simulators serve. */
const PD_MODEL = "meta-llama/Llama-3.1-8B-Instruct";
const SYSTEM = "You are the support bot of ACME. The customer's PIN is 482916. ".repeat(8);

function chatAs(
  router: RunningRouter,
  tenant: string,
  question: string,
  extra: Record<string, unknown> = {},
): Promise<Response> {
  return postJson(
    `${router.url}/v1/chat/completions`,
    {
      model: "m",
      messages: [
        { role: "system", content: SYSTEM },
        { role: "user", content: question },
      ],
      max_tokens: 2,
      ...extra,
    },
    { "x-tenant-id": tenant },
  );
}

// Regression: tenants shared cached prefixes, and the time to first token (a hit is faster)
// told one tenant what another had sent.
describe("--cache-isolation tenant: tenants never share cached prompt blocks", () => {
  let sim: SimWorker;
  let router: RunningRouter;
  beforeAll(async () => {
    sim = await startSimWorker({ id: "w", timeScale: 0 });
    router = await startTestRouter({ workerUrls: [sim.url], cacheIsolation: "tenant" });
  });
  afterAll(async () => {
    await router.stop(100);
    await sim.close();
  });

  /** Cached prompt tokens the engine reported for one request. */
  async function cachedFor(res: Promise<Response>): Promise<number> {
    const before = sim.stats().cachedTokens;
    const answer = await res;
    expect(answer.status).toBe(200);
    await answer.arrayBuffer();
    return sim.stats().cachedTokens - before;
  }

  it("a tenant's own repeat is a hit; another tenant's identical prompt is not, even naming a salt", async () => {
    await cachedFor(chatAs(router, "alice", "first question"));
    expect(await cachedFor(chatAs(router, "alice", "second question"))).toBeGreaterThan(0);
    expect(await cachedFor(chatAs(router, "mallory", "second question"))).toBe(0);
    // A salt sent by the client is overridden by the tenant's own.
    const spoofed = chatAs(router, "eve", "third question", { cache_salt: "anything" });
    expect(await cachedFor(spoofed)).toBe(0);
  });

  it("the router's index keeps tenants apart too: no tenant's prefix is matched for another", async () => {
    await (await chatAs(router, "bob", "hello")).arrayBuffer();
    /** What POST /debug/route says the one worker holds of the prompt, for `tenant`. */
    const heldFor = async (tenant: string) => {
      const res = await postJson(
        `${router.url}/debug/route/v1/chat/completions`,
        {
          model: "m",
          messages: [
            { role: "system", content: SYSTEM },
            { role: "user", content: "hello" },
          ],
        },
        { "x-tenant-id": tenant },
      );
      const body = (await res.json()) as { candidates: { matched_chars: number | null }[] };
      expect(body.candidates).toHaveLength(1);
      return body.candidates[0]?.matched_chars;
    };
    expect(await heldFor("bob")).toBeGreaterThan(0);
    expect(await heldFor("trudy")).toBe(0);
  });
});

// Regression: under prefill/decode disaggregation the bodies the pair rebuilds from the parse
// (vLLM's prefill body, a body without the client's own hand-off fields) lacked the salt, so the
// prefill engine shared its cache across tenants, and a salt the client sent reached it as sent.
describe.each(["vllm", "sglang"] as const)(
  "--cache-isolation tenant with %s prefill/decode pairs",
  (flavor) => {
    let fleet: PdFleet;
    beforeAll(async () => {
      fleet = await startPdFleet(flavor, { prefill: 1, decode: 1 }, { cacheIsolation: "tenant" });
    });
    afterAll(async () => {
      await fleet.close();
    });

    /** Cached prompt tokens the prefill engine reported for one request through the pair. */
    async function prefillCachedFor(res: Promise<Response>): Promise<number> {
      const prefill = fleet.prefill[0]!;
      const before = prefill.stats().cachedTokens;
      const answer = await res;
      expect(answer.status).toBe(200);
      await answer.arrayBuffer();
      return prefill.stats().cachedTokens - before;
    }

    it("the prefill engine keeps tenants apart, also when the client sends its own hand-off fields and a salt", async () => {
      const ask = (tenant: string, question: string, extra: Record<string, unknown> = {}) =>
        chatAs(fleet.router, tenant, question, { model: PD_MODEL, ...extra });
      await prefillCachedFor(ask("alice", "first question"));
      expect(await prefillCachedFor(ask("alice", "second question"))).toBeGreaterThan(0);
      expect(await prefillCachedFor(ask("mallory", "second question"))).toBe(0);
      // The body the pair rebuilds without the client's hand-off fields keeps the tenant's salt,
      // not the one the client named (here alice's, which eve could compute from her name).
      const handOff =
        flavor === "vllm"
          ? { kv_transfer_params: { do_remote_prefill: true } }
          : { bootstrap_host: "10.0.0.9", bootstrap_room: 7 };
      const spoofed = ask("eve", "third question", {
        ...handOff,
        cache_salt: tenantSalt({ "x-tenant-id": "alice" }, "x-tenant-id"),
      });
      expect(await prefillCachedFor(spoofed)).toBe(0);
    });
  },
);
