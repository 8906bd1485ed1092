/**
 * An adapter name (SGLang's lora_path) longer than any path is refused at the bytes that prove it:
 * 400 naming the field before the rest of the body arrives. A client sending distinct 5 MB names
 * one after another cost the router a copy of each whole body, its hand-off to a parse process
 * and the parse, before the parse's own check refused it.
 */
import { describe, expect, it } from "vitest";
import { simBehindRouter } from "../helpers/sim-behind-router.js";
import { openRequest, within } from "./raw-client.js";

describe("a lora_path or model longer than a path is refused from its first bytes", () => {
  const fixture = simBehindRouter();

  it("answers 400 naming lora_path before the body ends: the other 5 MB are never waited for", async () => {
    const before = fixture.sim.stats().requests;
    const req = openRequest(fixture.router.url, "/generate", {
      "content-type": "application/json",
      "content-length": 5 * 1024 * 1024,
    });
    expect(await req.write(`{"text":"hello","lora_path":"${"a".repeat(8192)}`)).toBe(true);
    // Before, the router read on until the whole declared body was in (or its idle timeout).
    const answer = await within(req.answer, 5000, "answer");
    expect(answer.status).toBe(400);
    const error = JSON.parse(answer.body).error as { code: string; message: string };
    expect(error.code).toBe("invalid_request");
    expect(error.message).toContain('"lora_path"');
    expect(fixture.sim.stats().requests).toBe(before);
    req.socket.destroy();
  });

  it("a list holding one such name, its key spelled with an escape: refused the same way", async () => {
    const req = openRequest(fixture.router.url, "/generate", {
      "content-type": "application/json",
      "content-length": 5 * 1024 * 1024,
    });
    const head = `{"text":"hello","lora\\u005fpath":["sql","${"é".repeat(5000)}`;
    expect(await req.write(head)).toBe(true);
    const answer = await within(req.answer, 5000, "answer");
    expect(answer.status).toBe(400);
    expect(JSON.parse(answer.body).error.message).toContain('"lora_path"');
    req.socket.destroy();
  });

  it("a model name past a path and an adapter (SGLang's <base>:<adapter>) is refused the same way", async () => {
    const req = openRequest(fixture.router.url, "/v1/chat/completions", {
      "content-type": "application/json",
      "content-length": 5 * 1024 * 1024,
    });
    expect(await req.write(`{"model":"llama:${"a".repeat(9000)}`)).toBe(true);
    const answer = await within(req.answer, 5000, "answer");
    expect(answer.status).toBe(400);
    expect(JSON.parse(answer.body).error.message).toContain('"model"');
    req.socket.destroy();
  });
});
