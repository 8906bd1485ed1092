import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Pool } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Cancel } from "../../src/proxy/cancel.js";
import { readJson } from "../../src/proxy/pair.js";
import { callUpstream } from "../../src/proxy/upstream-call.js";
import { UsageTap } from "../../src/proxy/usage-tap.js";

/**
 * A vLLM prefill answer read through the proxy's upstream call (proxy/pair.ts readJson), against a
 * real socket: whole when small, cut past its bound, an error when it breaks off.
 */
describe("readJson: a prefill answer read whole, within its bound", () => {
  let server: Server;
  let pool: Pool;
  /** Resolves when the server sees the client drop the /endless answer's connection. */
  let dropped: Promise<void>;
  beforeAll(async () => {
    let onDrop: () => void = () => {};
    dropped = new Promise((resolve) => {
      onDrop = resolve;
    });
    server = createServer((req, res) => {
      if (req.url === "/small") {
        res.setHeader("content-type", "application/json");
        res.end(
          JSON.stringify({
            kv_transfer_params: { remote_engine_id: "e" },
            usage: {
              prompt_tokens: 7,
              completion_tokens: 1,
              prompt_tokens_details: { cached_tokens: 4 },
            },
          }),
        );
        return;
      }
      if (req.url === "/endless") {
        res.on("close", onDrop);
        const chunk = Buffer.alloc(16 * 1024, 0x20);
        const write = () => {
          while (!res.destroyed && res.write(chunk)) {}
          if (!res.destroyed) res.once("drain", write);
        };
        write();
        return;
      }
      // /broken: half an answer, then the socket is gone.
      res.writeHead(200, { "content-type": "application/json", "content-length": "100" });
      res.write('{"kv_transfer_params":');
      setImmediate(() => res.socket?.destroy());
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    pool = new Pool(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  });
  afterAll(async () => {
    await pool.close();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  const answer = (path: string) =>
    callUpstream(
      pool,
      { method: "POST", path, body: "{}", headersTimeout: 0, bodyTimeout: 0 },
      new Cancel(),
    );

  it("parses a small answer, the usage tap reading it on the way", async () => {
    const tap = new UsageTap();
    const parsed = await readJson(await answer("/small"), 1024 * 1024, tap);
    expect(parsed).toMatchObject({ kv_transfer_params: { remote_engine_id: "e" } });
    expect(tap.result()).toMatchObject({ promptTokens: 7, cachedTokens: 4 });
  });

  it("an answer past the bound is cut (the connection dropped, the rest never read): undefined", async () => {
    expect(await readJson(await answer("/endless"), 64 * 1024)).toBeUndefined();
    await dropped;
  });

  it("an answer that breaks off rejects (the pair reports it as such)", async () => {
    await expect(readJson(await answer("/broken"), 1024 * 1024)).rejects.toThrow();
  });
});
