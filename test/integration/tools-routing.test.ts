import { describe, expect, it } from "vitest";
import { matchRate, postJson } from "../helpers/router.js";
import { simBehindRouter } from "../helpers/sim-behind-router.js";

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

describe("tool definitions are part of the routing text (issue 13 item 6)", () => {
  const fixture = simBehindRouter({ policy: "cache_aware" });
  const messages = [{ role: "user", content: "What is the weather in Paris tomorrow?" }];

  it("same messages with different tool schemas are not a full cache hit", async () => {
    const first = await postJson(`${fixture.router.url}/v1/chat/completions`, {
      messages,
      tools: [tool("get_weather")],
      max_tokens: 1,
    });
    expect(first.status).toBe(200);
    await first.arrayBuffer();
    const second = await postJson(`${fixture.router.url}/v1/chat/completions`, {
      messages,
      tools: [tool("book_flight")],
      max_tokens: 1,
    });
    expect(second.status).toBe(200);
    await second.arrayBuffer();
    expect(matchRate(second)).toBeLessThan(0.5);
  });

  it("same tools and messages again are a full cache hit", async () => {
    const again = await postJson(`${fixture.router.url}/v1/chat/completions`, {
      messages,
      tools: [tool("get_weather")],
      max_tokens: 1,
    });
    expect(again.status).toBe(200);
    await again.arrayBuffer();
    expect(matchRate(again)).toBe(1);
  });
});
