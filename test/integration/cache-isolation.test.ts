import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import type { RunningRouter } from "../../src/server.js";
import { postJson, startTestRouter } from "../helpers/router.js";

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
    const own = await fetch(`${router.url}/debug/route/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-tenant-id": "bob" },
      body: JSON.stringify({
        model: "m",
        messages: [
          { role: "system", content: SYSTEM },
          { role: "user", content: "hello" },
        ],
      }),
    });
    const mine = (await own.json()) as { candidates: { matched_chars: number | null }[] };
    expect(mine.candidates[0]?.matched_chars).toBeGreaterThan(0);
    const explain = await fetch(`${router.url}/debug/route/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-tenant-id": "trudy" },
      body: JSON.stringify({
        model: "m",
        messages: [
          { role: "system", content: SYSTEM },
          { role: "user", content: "hello" },
        ],
      }),
    });
    const body = (await explain.json()) as { candidates: { matched_chars: number | null }[] };
    expect(body.candidates).toHaveLength(1);
    expect(body.candidates[0]?.matched_chars).toBe(0);
  });
});
