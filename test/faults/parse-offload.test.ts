import { describe, expect, it } from "vitest";
import { matchRate, postJson } from "../helpers/router.js";
import { simBehindRouter } from "../helpers/sim-behind-router.js";
import { chunk, openRequest } from "./raw-client.js";
import { errorCode } from "./support.js";

const OFFLOAD = 4096;

describe("large request bodies are parsed off the event loop (issue 10 item 1)", () => {
  const fixture = simBehindRouter({
    parseOffloadBytes: OFFLOAD,
    parseWorkers: 1,
    parseWorkerMemoryMb: 16,
    maxRoutingTextChars: 20_000,
  });

  const pool = () => {
    const p = fixture.router.context.parsePool;
    if (p === undefined) throw new Error("no parse pool");
    return p;
  };

  it("a body of at least --parse-offload-bytes is parsed by a parse worker and routed as in line", async () => {
    const before = pool().completed;
    const messages = [
      { role: "system", content: "s".repeat(OFFLOAD) },
      { role: "user", content: "offloaded?" },
    ];
    const first = await postJson(`${fixture.router.url}/v1/chat/completions`, {
      messages,
      max_tokens: 1,
    });
    expect(first.status).toBe(200);
    await first.arrayBuffer();
    expect(pool().completed).toBe(before + 1);
    // The worker's routing text went into the index: the same prompt again is a full hit.
    const again = await postJson(`${fixture.router.url}/v1/chat/completions`, {
      messages,
      max_tokens: 1,
    });
    expect(again.status).toBe(200);
    await again.arrayBuffer();
    expect(matchRate(again)).toBe(1);
    expect(pool().completed).toBe(before + 2);
  });

  it("a large chunked body (no Content-Length) is parsed by a parse worker too", async () => {
    const before = pool().completed;
    const body = JSON.stringify({ prompt: "c".repeat(3 * OFFLOAD), max_tokens: 1 });
    const req = openRequest(fixture.router.url, "/v1/completions", {
      "content-type": "application/json",
      "transfer-encoding": "chunked",
    });
    for (let at = 0; at < body.length; at += 1000)
      await req.write(chunk(body.slice(at, at + 1000)));
    await req.write(chunk(""));
    expect((await req.answer).status).toBe(200);
    req.socket.destroy();
    expect(pool().completed).toBe(before + 1);
  });

  it("a small body is parsed in line (no hand-off)", async () => {
    const before = pool().completed;
    const res = await postJson(`${fixture.router.url}/v1/completions`, {
      prompt: "tiny",
      max_tokens: 1,
    });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    expect(pool().completed).toBe(before);
  });

  it("errors raised in the parse worker are the same catalog errors (400 invalid_json, invalid_request)", async () => {
    const broken = `{"prompt": "${"x".repeat(OFFLOAD)}"`;
    const res = await postJson(`${fixture.router.url}/v1/completions`, broken);
    expect(res.status).toBe(400);
    expect(await errorCode(res)).toBe("invalid_json");
    const deep = `{"prompt": ${"[".repeat(OFFLOAD)}1${"]".repeat(OFFLOAD)}}`;
    const nested = await postJson(`${fixture.router.url}/v1/completions`, deep);
    expect(nested.status).toBe(400);
    expect(await errorCode(nested)).toBe("invalid_request");
  });

  it("the routing text is cut at --max-routing-text-chars", async () => {
    const workerId = fixture.router.context.registry.list()[0]!.id;
    const before = fixture.router.context.index.size(workerId);
    const res = await postJson(`${fixture.router.url}/v1/completions`, {
      prompt: `unique-${"q".repeat(100_000)}`,
      max_tokens: 1,
    });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    expect(fixture.router.context.index.size(workerId) - before).toBeLessThanOrEqual(20_000);
  });

  it("a body whose parse needs more than --parse-worker-memory-mb gets 413; the next body gets a fresh worker", async () => {
    // About 1.5 million small objects: far more than 16 MB of heap once parsed.
    const huge = `{"prompt": "x", "junk": [${'{"a":1},'.repeat(1_500_000)}{"a":1}]}`;
    const res = await postJson(`${fixture.router.url}/v1/completions`, huge);
    expect(res.status).toBe(413);
    const error = ((await res.json()) as { error: { code: string; message: string } }).error;
    expect(error.code).toBe("payload_too_large");
    expect(error.message).toContain("--parse-worker-memory-mb");
    const after = pool().completed;
    const ok = await postJson(`${fixture.router.url}/v1/completions`, {
      prompt: "p".repeat(OFFLOAD),
      max_tokens: 1,
    });
    expect(ok.status).toBe(200);
    await ok.arrayBuffer();
    expect(pool().completed).toBe(after + 1);
  });
});
