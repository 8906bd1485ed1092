/**
 * A body whose first bytes prove it nested too deep is refused as they arrive: 400 at once, the
 * rest never kept or scanned. A flood of such bodies (8 clients posting 240 KB nested 120,000
 * deep) cost the router a copy of every whole body it refused, and its garbage.
 */
import { describe, expect, it } from "vitest";
import { simBehindRouter } from "../helpers/sim-behind-router.js";
import { openRequest, sleep, within } from "./raw-client.js";

const DEEP_HEAD = `{"messages":[{"role":"user","content":"x"}],"max_tokens":1,"extra":${"[".repeat(2000)}`;

describe("a body nested too deep is refused from its first bytes", () => {
  const fixture = simBehindRouter();

  it("answers 400 before the body ends: the router does not wait for the other 238 KB", async () => {
    const before = fixture.sim.stats().requests;
    const req = openRequest(fixture.router.url, "/v1/chat/completions", {
      "content-type": "application/json",
      "content-length": 240_000,
    });
    expect(await req.write(DEEP_HEAD)).toBe(true);
    // Before, the router read on until the whole declared body was in (or its idle timeout).
    const answer = await within(req.answer, 5000, "answer");
    expect(answer.status).toBe(400);
    expect(JSON.parse(answer.body).error.code).toBe("invalid_request");
    expect(fixture.sim.stats().requests).toBe(before);
    req.socket.destroy();
  });

  it("brackets inside strings, an escape cut between two chunks: the body passes", async () => {
    const before = fixture.sim.stats().requests;
    const content = `${"[".repeat(3000)}\\"${"{".repeat(3000)}`;
    const text = JSON.stringify({ messages: [{ role: "user", content }], max_tokens: 1 });
    const cut = text.indexOf("\\") + 1;
    const req = openRequest(fixture.router.url, "/v1/chat/completions", {
      "content-type": "application/json",
      "content-length": Buffer.byteLength(text),
    });
    req.socket.setNoDelay(true);
    // Three chunks: the middle one starts with the byte the backslash escapes (a quote).
    for (const piece of [text.slice(0, cut), text.slice(cut, cut + 10), text.slice(cut + 10)]) {
      expect(await req.write(piece)).toBe(true);
      await sleep(20);
    }
    const answer = await within(req.answer, 5000, "answer");
    expect(answer.status).toBe(200);
    expect(fixture.sim.stats().requests).toBe(before + 1);
    req.socket.destroy();
  });
});
