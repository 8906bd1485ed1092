import { describe, expect, it } from "vitest";
import { postChat } from "../helpers/router.js";
import { simsBehindRouter } from "../helpers/sim-behind-router.js";

const SYSTEM = "You answer questions about the shared radix index, briefly. ".repeat(30);

describe("--prefix-index shared", () => {
  const fleet = simsBehindRouter(3, "s", { prefixIndex: "shared" });

  const ask = async (model: string, question: string): Promise<Response> => {
    const res = await postChat(fleet.router, SYSTEM, question, model);
    await res.arrayBuffer();
    return res;
  };

  it("routes a shared long prefix to one worker and says which index decided", async () => {
    expect(fleet.router.context.index.name).toBe("shared");
    const served = new Set<string | null>();
    for (let i = 0; i < 6; i++) {
      const res = await ask("m", `Question ${i}?`);
      expect(res.status).toBe(200);
      served.add(res.headers.get("x-radixgate-worker"));
      if (i > 0) expect(res.headers.get("x-radixgate-route")).toMatch(/^cache_hit;/);
    }
    expect(served.size).toBe(1);
    const [id] = served;
    expect(fleet.router.context.index.size(id!)).toBeGreaterThan(SYSTEM.length);
  });
});
