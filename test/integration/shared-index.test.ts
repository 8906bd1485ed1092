import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import type { RunningRouter } from "../../src/server.js";
import { postJson, startTestRouter } from "../helpers/router.js";

const SYSTEM = "You answer questions about the shared radix index, briefly. ".repeat(30);

describe("--prefix-index shared", () => {
  let workers: SimWorker[];
  let router: RunningRouter;

  beforeAll(async () => {
    workers = await Promise.all(
      [1, 2, 3].map((i) => startSimWorker({ id: `s${i}`, timeScale: 0 })),
    );
    router = await startTestRouter({
      policy: "cache_aware",
      workerUrls: workers.map((w) => w.url),
      prefixIndex: "shared",
    });
  });

  afterAll(async () => {
    await router.stop(100);
    await Promise.all(workers.map((w) => w.close()));
  });

  const ask = async (model: string, question: string): Promise<Response> => {
    const res = await postJson(`${router.url}/v1/chat/completions`, {
      model,
      messages: [
        { role: "system", content: SYSTEM },
        { role: "user", content: question },
      ],
      max_tokens: 2,
    });
    await res.arrayBuffer();
    return res;
  };

  it("routes a shared long prefix to one worker and says which index decided", async () => {
    expect(router.context.index.name).toBe("shared");
    const served = new Set<string | null>();
    for (let i = 0; i < 6; i++) {
      const res = await ask("m", `Question ${i}?`);
      expect(res.status).toBe(200);
      served.add(res.headers.get("x-radixgate-worker"));
      if (i > 0) expect(res.headers.get("x-radixgate-route")).toMatch(/^cache_hit;/);
    }
    expect(served.size).toBe(1);
    const [id] = served;
    expect(router.context.index.size(id!)).toBeGreaterThan(SYSTEM.length);
  });
});
