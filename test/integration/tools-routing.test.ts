import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningRouter } from "../../src/server.js";
import { type SimWorker, startSimWorker } from "../../src/sim/worker.js";
import { postJson, startTestRouter } from "../helpers/router.js";

/** A tool whose JSON schema is about 500 characters, as in issue 13 item 6. */
function tool(name: string) {
  return {
    type: "function",
    function: {
      name,
      description: `${name}: ${"does something useful with the arguments it is given. ".repeat(6)}`,
      parameters: {
        type: "object",
        properties: { city: { type: "string" }, days: { type: "integer" } },
        required: ["city"],
      },
    },
  };
}

function matchRate(res: Response): number {
  const route = res.headers.get("x-radixgate-route") ?? "";
  const m = /match=(\d\.\d\d)/.exec(route);
  if (!m) throw new Error(`no match rate in "${route}"`);
  return Number(m[1]);
}

describe("tool definitions are part of the routing text (issue 13 item 6)", () => {
  let sim: SimWorker;
  let router: RunningRouter;
  const messages = [{ role: "user", content: "What is the weather in Paris tomorrow?" }];

  beforeAll(async () => {
    sim = await startSimWorker({ id: "w", timeScale: 0 });
    router = await startTestRouter({ workerUrls: [sim.url], policy: "cache_aware" });
  });
  afterAll(async () => {
    await router.stop(100);
    await sim.close();
  });

  it("same messages with different tool schemas are not a full cache hit", async () => {
    const first = await postJson(`${router.url}/v1/chat/completions`, {
      messages,
      tools: [tool("get_weather")],
      max_tokens: 1,
    });
    expect(first.status).toBe(200);
    await first.arrayBuffer();
    const second = await postJson(`${router.url}/v1/chat/completions`, {
      messages,
      tools: [tool("book_flight")],
      max_tokens: 1,
    });
    expect(second.status).toBe(200);
    await second.arrayBuffer();
    expect(matchRate(second)).toBeLessThan(0.5);
  });

  it("same tools and messages again are a full cache hit", async () => {
    const again = await postJson(`${router.url}/v1/chat/completions`, {
      messages,
      tools: [tool("get_weather")],
      max_tokens: 1,
    });
    expect(again.status).toBe(200);
    await again.arrayBuffer();
    expect(matchRate(again)).toBe(1);
  });
});
