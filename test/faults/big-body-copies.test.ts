import { createHash } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { serialize } from "node:v8";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import type { RunningRouter } from "../../src/server.js";
import { ModuleProcess } from "../../src/watched-file/module-process.js";
import { startTestRouter } from "../helpers/router.js";
import { openRequest } from "./raw-client.js";

/**
 * A large body crosses the router without a whole-body copy on the event loop: its bytes go into
 * one buffer as they arrive (not joined at the end), and reach the parse process through its byte
 * channel (not inside a message, whose structured clone copied 60 MB twice and wrote it in one
 * go: 3 s without a /health answer with 16 such bodies).
 */
describe("large bodies: no whole-body copy on the event loop", () => {
  /** sha256 of each body the engine received, hashed as it came (no copy here either). */
  const received: string[] = [];
  let engine: Server;
  let router: RunningRouter;

  beforeAll(async () => {
    engine = createServer((req, res) => {
      if (req.method === "GET") return void res.end("{}");
      const hash = createHash("sha256");
      req.on("data", (chunk: Buffer) => hash.update(chunk));
      req.on("end", () => {
        received.push(hash.digest("hex"));
        res.setHeader("content-type", "application/json");
        res.end(JSON.stringify({ id: "c", object: "text_completion", choices: [] }));
      });
    });
    await new Promise<void>((resolve) => engine.listen(0, "127.0.0.1", resolve));
    router = await startTestRouter({
      workerUrls: [`http://127.0.0.1:${(engine.address() as AddressInfo).port}`],
      parseOffloadBytes: 64 * 1024,
      parseWorkers: 1,
    });
  });
  afterAll(async () => {
    await router?.stop(100);
    await new Promise((resolve) => engine?.close(resolve));
  });
  afterEach(() => vi.restoreAllMocks());

  it("bodies sent in pieces reach the parser and the engine whole, in order, never copied whole", async () => {
    const posted: number[] = [];
    const post = ModuleProcess.prototype.postMessage;
    vi.spyOn(ModuleProcess.prototype, "postMessage").mockImplementation(function (
      this: ModuleProcess,
      value: unknown,
    ) {
      posted.push(serialize(value).length);
      return post.call(this, value);
    });
    const concat = Buffer.concat;
    const joined: number[] = [];
    vi.spyOn(Buffer, "concat").mockImplementation((list, total) => {
      const out = concat(list, total);
      joined.push(out.length);
      return out;
    });
    // Three bodies of different lengths, with multi-byte characters cut across pieces: bytes out
    // of order or misaligned on the byte channel would not parse.
    const bodies = [300_000, 700_000, 1_100_000].map((size, i) =>
      Buffer.from(JSON.stringify({ prompt: `${i} é€😀 ${"x".repeat(size)} ${i}`, max_tokens: 1 })),
    );
    const sha = (b: Buffer) => createHash("sha256").update(b).digest("hex");
    // One parse process: the bodies queue for it and cross its one channel one after another.
    const answers = await Promise.all(
      bodies.map(async (body) => {
        const req = openRequest(router.url, "/v1/completions", {
          "content-type": "application/json",
          "content-length": body.length,
        });
        for (let at = 0; at < body.length; at += 99_991) {
          await req.write(body.subarray(at, at + 99_991));
        }
        const answer = await req.answer;
        req.socket.destroy();
        return answer;
      }),
    );
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200]);
    expect(received.sort()).toEqual(bodies.map(sha).sort());
    expect(router.context.parsePool?.completed).toBe(3);
    // The parse jobs were posted without their bodies, and no body was joined whole (the parse
    // process's answers, a routing text each, are joined from the IPC channel's pieces).
    expect(posted).toHaveLength(3);
    for (const size of posted) expect(size).toBeLessThan(1024);
    for (const body of bodies) expect(joined).not.toContain(body.length);
  }, 30_000);
});
