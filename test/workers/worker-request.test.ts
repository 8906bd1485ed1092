import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Pool } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  BodyTooLargeError,
  readCappedBody,
  requestWorker,
} from "../../src/workers/worker-request.js";

interface Seen {
  method: string | undefined;
  url: string | undefined;
  headers: IncomingMessage["headers"];
  body: string;
}

describe("requestWorker and readCappedBody", () => {
  let server: Server;
  let pool: Pool;
  let seen: Seen | undefined;

  beforeAll(async () => {
    server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        seen = {
          method: req.method,
          url: req.url,
          headers: req.headers,
          body: Buffer.concat(chunks).toString(),
        };
        if (req.url?.endsWith("/silent")) return; // never answers
        res.end(req.url?.endsWith("/big") ? "x".repeat(100_000) : "ok");
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    pool = new Pool(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  });
  afterAll(async () => {
    await pool.destroy();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  const worker = (authorization?: string) => ({ pool, basePath: "/engine", authorization });

  it("asks under the worker's base path with the worker's own key, which wins over a passed-on one", async () => {
    const res = await requestWorker(worker("Bearer own"), "/health", {
      timeoutMs: 2000,
      fallbackAuthorization: "Bearer client",
    });
    expect(await res.body.text()).toBe("ok");
    expect(seen).toMatchObject({ method: "GET", url: "/engine/health" });
    expect(seen?.headers.authorization).toBe("Bearer own");
  });

  it("passes the client's key on only to a worker without one, and no key when neither has one", async () => {
    await (
      await requestWorker(worker(), "/v1/models", {
        timeoutMs: 2000,
        fallbackAuthorization: "Bearer client",
      })
    ).body.dump();
    expect(seen?.headers.authorization).toBe("Bearer client");
    await (await requestWorker(worker(), "/v1/models", { timeoutMs: 2000 })).body.dump();
    expect(seen?.headers.authorization).toBeUndefined();
  });

  it("posts a JSON body as application/json", async () => {
    const res = await requestWorker(worker(), "/tokenize", {
      method: "POST",
      json: { prompt: "hi" },
      timeoutMs: 2000,
    });
    await res.body.dump();
    expect(seen).toMatchObject({
      method: "POST",
      url: "/engine/tokenize",
      body: '{"prompt":"hi"}',
    });
    expect(seen?.headers["content-type"]).toBe("application/json");
  });

  it("gives up on a worker that does not answer within the timeout", async () => {
    await expect(requestWorker(worker(), "/silent", { timeoutMs: 100 })).rejects.toThrow();
  });

  it("reads a body within the limit whole and refuses a larger one", async () => {
    const small = await requestWorker(worker(), "/big", { timeoutMs: 2000 });
    expect((await readCappedBody(small.body, 100_000)).length).toBe(100_000);
    const big = await requestWorker(worker(), "/big", { timeoutMs: 2000 });
    const refused = await readCappedBody(big.body, 1024).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(BodyTooLargeError);
    expect((refused as Error).message).toBe("body larger than 1024 bytes");
  });
});
