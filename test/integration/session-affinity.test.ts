import { afterEach, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import type { RunningRouter } from "../../src/server.js";
import { postJson, startTestRouter } from "../helpers/router.js";

describe("--session-affinity through the router", () => {
  let router: RunningRouter | undefined;
  let sims: SimWorker[] = [];
  afterEach(async () => {
    await router?.stop(100);
    await Promise.all(sims.map((s) => s.close()));
    router = undefined;
    sims = [];
  });

  async function fleet(overrides: Parameters<typeof startTestRouter>[0]) {
    sims = await Promise.all(["s1", "s2", "s3"].map((id) => startSimWorker({ id, timeScale: 0 })));
    router = await startTestRouter({
      workerUrls: sims.map((s) => s.url),
      policy: "round_robin",
      ...overrides,
    });
    return router;
  }

  async function turn(
    url: string,
    content: string,
    headers: Record<string, string> = {},
    user?: string,
  ): Promise<{ worker: string | null; route: string | null }> {
    const res = await postJson(
      `${url}/v1/chat/completions`,
      { messages: [{ role: "user", content }], max_tokens: 1, ...(user ? { user } : {}) },
      headers,
    );
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    return {
      worker: res.headers.get("x-radixgate-worker"),
      route: res.headers.get("x-radixgate-route"),
    };
  }

  it("header mode: every turn of a conversation reaches one worker; other traffic still rotates", async () => {
    const { url } = await fleet({ sessionAffinity: "header" });
    const first = await turn(url, "turn 0", { "x-session-id": "conv-a" });
    const others = new Set<string | null>();
    for (let i = 1; i <= 5; i++) {
      others.add((await turn(url, `other ${i}`)).worker);
      const next = await turn(url, `turn ${i}`, { "x-session-id": "conv-a" });
      expect(next.worker).toBe(first.worker);
      expect(next.route).toMatch(/^session/);
    }
    expect(others.size).toBeGreaterThan(1);
  });

  it("a configurable header, and the OpenAI user field", async () => {
    const { url } = await fleet({ sessionAffinity: "header", sessionHeader: "x-conversation" });
    const a = await turn(url, "hello", { "x-conversation": "c1" });
    for (let i = 0; i < 3; i++)
      expect((await turn(url, `again ${i}`, { "x-conversation": "c1" })).worker).toBe(a.worker);
    await router!.stop(100);
    router = await startTestRouter({
      workerUrls: sims.map((s) => s.url),
      policy: "round_robin",
      sessionAffinity: "user",
    });
    const u = await turn(router.url, "hi", {}, "user-7");
    for (let i = 0; i < 3; i++)
      expect((await turn(router.url, `more ${i}`, {}, "user-7")).worker).toBe(u.worker);
  });

  it("when the session's worker is removed, the conversation moves once and stays on the new one", async () => {
    const { url } = await fleet({ sessionAffinity: "header" });
    const first = await turn(url, "t0", { "x-session-id": "s" });
    expect(router!.context.registry.remove(first.worker!)).toBeDefined();
    const moved = await turn(url, "t1", { "x-session-id": "s" });
    expect(moved.worker).not.toBe(first.worker);
    for (let i = 2; i < 5; i++)
      expect((await turn(url, `t${i}`, { "x-session-id": "s" })).worker).toBe(moved.worker);
  });

  it("off by default: the header is ignored", async () => {
    const { url } = await fleet({});
    const workers = new Set<string | null>();
    for (let i = 0; i < 3; i++)
      workers.add((await turn(url, `t${i}`, { "x-session-id": "s" })).worker);
    expect(workers.size).toBe(3);
  });
});
