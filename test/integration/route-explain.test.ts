import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import type { RunningRouter } from "../../src/server.js";
import type { Worker } from "../../src/workers/worker.js";
import { postJson, startTestRouter } from "../helpers/router.js";

const PROMPT = "You are the billing assistant of an online shop; answer in one line. ".repeat(8);

interface Explained {
  dry_run: boolean;
  policy: string;
  routing_text_chars: number;
  decision: { worker: string; branch: string; match_rate: number | null } | null;
  candidates: {
    worker: string;
    matched_chars: number | null;
    match_rate: number | null;
    in_flight: number;
    cost?: number;
  }[];
  excluded: { worker: string; reason: string; detail?: string }[];
}

describe("POST /debug/route: where a request would go, and why", () => {
  let sims: SimWorker[];
  let router: RunningRouter;
  const explain = async (body: unknown, path = "/v1/completions") => {
    const res = await postJson(`${router.url}/debug/route${path}`, body);
    expect(res.status).toBe(200);
    return (await res.json()) as Explained;
  };
  const workerByUrl = (url: string) =>
    router.context.registry.list().find((w) => w.url === url) as Worker;

  beforeAll(async () => {
    sims = await Promise.all(
      ["a", "b", "c"].map((id) => startSimWorker({ id, timeScale: 0, model: "llama" })),
    );
    router = await startTestRouter({ workerUrls: sims.map((s) => s.url) });
  });
  afterAll(async () => {
    await router.stop(100);
    await Promise.all(sims.map((s) => s.close()));
  });

  it("names the worker holding the prompt, with every candidate's match and cost", async () => {
    const sent = await postJson(`${router.url}/v1/completions`, {
      prompt: PROMPT,
      max_tokens: 1,
    });
    expect(sent.status).toBe(200);
    await sent.arrayBuffer();
    const holder = sent.headers.get("x-radixgate-worker");
    const out = await explain({ prompt: PROMPT, max_tokens: 1 });
    expect(out.dry_run).toBe(true);
    expect(out.policy).toBe("prefix_cost");
    expect(out.routing_text_chars).toBe(PROMPT.length);
    expect(out.decision).toMatchObject({ worker: holder, branch: "lowest_cost", match_rate: 1 });
    expect(out.candidates).toHaveLength(3);
    for (const c of out.candidates) {
      expect(c.matched_chars).toBe(c.worker === holder ? PROMPT.length : 0);
      // prefix_cost's own formula: the holder has nothing left to prefill.
      expect(c.cost).toBe(c.worker === holder ? 0 : PROMPT.length);
    }
    expect(out.excluded).toEqual([]);
  });

  it("records nothing: the same new prompt explained twice is still cold", async () => {
    const fresh = `A prompt no worker has seen. ${PROMPT}`;
    const before = router.context.index.size(router.context.registry.list()[0]!.id);
    for (let i = 0; i < 2; i++) {
      const out = await explain({ prompt: fresh });
      expect(out.candidates.every((c) => c.matched_chars === 0)).toBe(true);
    }
    expect(router.context.index.size(router.context.registry.list()[0]!.id)).toBe(before);
    expect(sims.every((s) => s.stats().requests <= 1)).toBe(true);
  });

  it("says why a worker is out: unhealthy, or not serving the model", async () => {
    const b = workerByUrl(sims[1]!.url);
    const c = workerByUrl(sims[2]!.url);
    b.healthy = false;
    c.servedModels = new Set(["qwen"]);
    try {
      const out = await explain(
        { model: "llama", messages: [{ role: "user", content: "hi" }] },
        "/v1/chat/completions",
      );
      expect(out.candidates.map((x) => x.worker)).toEqual([workerByUrl(sims[0]!.url).id]);
      expect(out.excluded).toEqual(
        expect.arrayContaining([
          { worker: b.id, url: b.url, reason: "unhealthy" },
          {
            worker: c.id,
            url: c.url,
            reason: "model_not_served",
            detail: "does not list 'llama', and its engine refuses names it does not list",
          },
        ]),
      );
    } finally {
      b.healthy = true;
      c.servedModels = undefined;
    }
  });

  it("answers bad input with the data plane's errors", async () => {
    const res = await postJson(`${router.url}/debug/route/v1/completions`, "{not json");
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("invalid_json");
  });
});

describe("POST /debug/route behind the admin key", () => {
  it("refuses a request without the admin key", async () => {
    const sim = await startSimWorker({ id: "k", timeScale: 0 });
    const router = await startTestRouter({ workerUrls: [sim.url], adminApiKey: "s3cret-admin" });
    try {
      const refused = await postJson(`${router.url}/debug/route/generate`, { text: "hi" });
      expect(refused.status).toBe(401);
      const ok = await postJson(
        `${router.url}/debug/route/generate`,
        { text: "hi" },
        { authorization: "Bearer s3cret-admin" },
      );
      expect(ok.status).toBe(200);
      expect(((await ok.json()) as Explained).decision).not.toBeNull();
    } finally {
      await router.stop(100);
      await sim.close();
    }
  });
});
