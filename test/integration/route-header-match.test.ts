import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import type { RunningRouter } from "../../src/server.js";
import { postChat, startTestRouter } from "../helpers/router.js";

const ADMIN_KEY = "admin-key-for-the-test";
const SYSTEM = "You are the support bot of ACME. The customer's PIN is 482916. ".repeat(4);

// Regression: the match= value in x-radixgate-route went to every client, and probing prefixes
// one character at a time read another tenant's prompt (a 6-digit PIN in 31 requests).
describe("the route header's match rate goes only to admin clients or with --explain-header", () => {
  let sim: SimWorker;
  let router: RunningRouter;
  let explaining: RunningRouter;
  beforeAll(async () => {
    sim = await startSimWorker({ id: "w", timeScale: 0 });
    router = await startTestRouter({ workerUrls: [sim.url], adminApiKey: ADMIN_KEY });
    explaining = await startTestRouter({
      workerUrls: [sim.url],
      adminApiKey: ADMIN_KEY,
      explainHeader: "x-cache-explain",
    });
  });
  afterAll(async () => {
    await Promise.all([router.stop(100), explaining.stop(100)]);
    await sim.close();
  });

  it("a data-plane client sees the branch, never how much of its prompt is cached", async () => {
    await (await postChat(router, SYSTEM, "first")).arrayBuffer();
    const res = await postChat(router, SYSTEM, "second");
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    const route = res.headers.get("x-radixgate-route") ?? "";
    expect(route).not.toBe("");
    expect(route).not.toContain("match=");
  });

  it("a client with the admin key sees the match rate", async () => {
    const res = await fetch(`${router.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${ADMIN_KEY}` },
      body: JSON.stringify({
        model: "m",
        messages: [
          { role: "system", content: SYSTEM },
          { role: "user", content: "third" },
        ],
        max_tokens: 2,
      }),
    });
    await res.arrayBuffer();
    expect(res.headers.get("x-radixgate-route")).toMatch(/;match=\d\.\d\d/);
  });

  // Without an admin key a loopback client is an admin; a request relayed by another replica
  // comes from that replica's socket, which may be loopback while its client is anywhere.
  it("without an admin key, a loopback client sees it, and a relayed request does not", async () => {
    const open = await startTestRouter({ workerUrls: [sim.url] });
    try {
      const ask = async (user: string, headers: Record<string, string>) => {
        const res = await fetch(`${open.url}/v1/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json", ...headers },
          body: JSON.stringify({
            model: "m",
            messages: [
              { role: "system", content: SYSTEM },
              { role: "user", content: user },
            ],
            max_tokens: 2,
          }),
        });
        await res.arrayBuffer();
        return res.headers.get("x-radixgate-route") ?? "";
      };
      expect(await ask("fifth", {})).toMatch(/;match=\d\.\d\d/);
      const relayed = await ask("sixth", { "x-radixgate-relayed": "1" });
      expect(relayed).not.toBe("");
      expect(relayed).not.toContain("match=");
    } finally {
      await open.stop(100);
    }
  });

  it("with --explain-header every client sees it (the operator's choice)", async () => {
    const res = await postChat(explaining, SYSTEM, "fourth");
    await res.arrayBuffer();
    expect(res.headers.get("x-radixgate-route")).toMatch(/;match=\d\.\d\d/);
  });
});
