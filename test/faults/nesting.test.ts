import { describe, expect, it } from "vitest";
import { postJson } from "../helpers/router.js";
import { simBehindRouter } from "../helpers/sim-behind-router.js";
import { errorCode } from "./support.js";

/** `[[[...[1]...]]]` as JSON text, `depth` arrays deep (issue 10 item 5 used 8,000). */
const deepArray = (depth: number) => `${"[".repeat(depth)}1${"]".repeat(depth)}`;

describe("deeply nested request bodies", () => {
  const fixture = simBehindRouter();

  it.each([
    ["/v1/completions", "prompt"],
    ["/v1/embeddings", "input"],
    ["/generate", "input_ids"],
  ])(
    "%s with %s nested 8,000 levels: 400 invalid_request, not 500, no worker contacted",
    async (path, field) => {
      const before = fixture.sim.stats().requests;
      const res = await postJson(
        `${fixture.router.url}${path}`,
        `{"${field}": ${deepArray(8000)}}`,
      );
      expect(res.status).toBe(400);
      expect(await errorCode(res)).toBe("invalid_request");
      expect(fixture.sim.stats().requests).toBe(before);
    },
  );

  it("chat tools whose schema nests 8,000 levels: 400 invalid_request, not 500", async () => {
    const schema = `${'{"a":'.repeat(8000)}1${"}".repeat(8000)}`;
    const body = `{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":${schema}}}]}`;
    const res = await postJson(`${fixture.router.url}/v1/chat/completions`, body);
    expect(res.status).toBe(400);
    expect(await errorCode(res)).toBe("invalid_request");
  });

  it("a body nested 120,000 deep in a field no one reads (just under --parse-offload-bytes): 400 before it is parsed", async () => {
    // Parsed on the event loop, such a body cost about 100 ms each; 8 clients sending them
    // pushed everyone's p99 from 28 to 478 ms. Its bytes show the depth without a parse.
    const before = fixture.sim.stats().requests;
    const body = `{"messages":[{"role":"user","content":"x"}],"max_tokens":1,"extra":${deepArray(120_000)}}`;
    expect(body.length).toBeLessThan(256 * 1024);
    const res = await postJson(`${fixture.router.url}/v1/chat/completions`, body);
    expect(res.status).toBe(400);
    expect(await errorCode(res)).toBe("invalid_request");
    expect(fixture.sim.stats().requests).toBe(before);
  });

  it("1,000 levels in a field no one reads still reach the engine", async () => {
    const body = `{"messages":[{"role":"user","content":"x"}],"max_tokens":1,"extra":${deepArray(999)}}`;
    const res = await postJson(`${fixture.router.url}/v1/chat/completions`, body);
    expect(res.status).toBe(200);
    await res.arrayBuffer();
  });

  it("the router keeps serving afterwards", async () => {
    const res = await postJson(`${fixture.router.url}/v1/completions`, { prompt: [[1, 2], [3]] });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
  });
});
