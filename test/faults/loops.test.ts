/**
 * Issue 10 item 4: a worker URL that points back at the router made a request loop that
 * exhausted file descriptors in under a second. Refused when added; stopped in flight by Via.
 */
import { createServer, request as httpRequest, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import { isSelfAddress } from "../../src/workers/self-address.js";
import { postJson } from "../helpers/router.js";
import { chat, errorCode, startedPerTest, startLoggedRouter } from "./support.js";

/** A plain reverse proxy to `target` (a port mapping the router cannot see through). */
async function startProxy(
  target: string,
): Promise<{ url: string; hits: () => number; server: Server }> {
  let hits = 0;
  const to = new URL(target);
  const server = createServer((req, res) => {
    if (req.url !== "/health") hits += 1;
    const upstream = httpRequest(
      { host: to.hostname, port: to.port, path: req.url, method: req.method, headers: req.headers },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on("error", () => res.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, hits: () => hits, server };
}

describe("request loops", () => {
  const started = startedPerTest();

  it.each([
    "http://127.0.0.1:PORT",
    "http://localhost:PORT/",
    "http://[::ffff:127.0.0.1]:PORT",
    "http://127.0.0.2:PORT/v1",
    // The unspecified address reaches this machine's listeners, whatever the router listens on.
    "http://0:PORT",
    "http://0.0.0.0:PORT",
    "http://[::]:PORT",
    "http://[::ffff:0.0.0.0]:PORT",
  ])(
    "adding the router's own address (%s) is refused with 400 invalid_worker_url",
    async (spelling) => {
      const logged = await startLoggedRouter();
      started.router = logged.router;
      const url = spelling.replace("PORT", String(logged.router.port));
      const res = await postJson(`${logged.router.url}/workers`, { url });
      expect(res.status).toBe(400);
      const body = (await res.json()) as { error: { code: string; message: string } };
      expect(body.error.code).toBe("invalid_worker_url");
      expect(body.error.message).toMatch(/own address.*loop/);
      expect(logged.router.context.registry.size).toBe(0);
    },
  );

  it("the router's own address is recognised for 0.0.0.0 / :: listeners and not for other ports", () => {
    expect(isSelfAddress("http://127.0.0.1:30000", { host: "0.0.0.0", port: 30000 })).toBe(true);
    expect(isSelfAddress("http://[::1]:30000", { host: "::", port: 30000 })).toBe(true);
    expect(isSelfAddress("http://localhost:30000", { host: "0.0.0.0", port: 30000 })).toBe(true);
    expect(isSelfAddress("http://127.0.0.1:30001", { host: "0.0.0.0", port: 30000 })).toBe(false);
    expect(isSelfAddress("http://10.9.8.7:30000", { host: "127.0.0.1", port: 30000 })).toBe(false);
    expect(isSelfAddress("http://10.9.8.7:30000", { host: "10.9.8.7", port: 30000 })).toBe(true);
    expect(isSelfAddress("http://0.0.0.0:30000", { host: "10.9.8.7", port: 30000 })).toBe(true);
    expect(isSelfAddress("http://0.0.0.0:30001", { host: "10.9.8.7", port: 30000 })).toBe(false);
    // Default ports count: http://host is port 80.
    expect(isSelfAddress("http://localhost", { host: "0.0.0.0", port: 80 })).toBe(true);
  });

  it("a loop through a proxy the router cannot see through is stopped by Via: 508 loop_detected after one hop", async () => {
    const logged = await startLoggedRouter({ retryMaxAttempts: 3 });
    started.router = logged.router;
    const proxy = await startProxy(logged.router.url);
    try {
      const added = await postJson(`${logged.router.url}/workers`, { url: proxy.url });
      expect(added.status).toBe(202);

      const res = await chat(logged.router.url, "round and round");
      expect(res.status).toBe(508);
      expect(await errorCode(res)).toBe("loop_detected");
      // One trip through the proxy: the second pass through the router stopped it.
      expect(proxy.hits()).toBe(1);
      const lines = logged.accessLog();
      expect(lines.map((l) => l.status).sort()).toEqual([508, 508]);
      expect(lines.find((l) => l.attempts === 0)).toMatchObject({ error: "loop_detected" });
    } finally {
      await new Promise<void>((resolve) => {
        proxy.server.close(() => resolve());
        proxy.server.closeAllConnections();
      });
    }
  });

  it("the router appends itself to the Via header it sends to workers", async () => {
    let via: string | undefined;
    const server = createServer((req, res) => {
      via = req.headers.via;
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const logged = await startLoggedRouter({ workerUrls: [url] });
    started.router = logged.router;
    try {
      const res = await fetch(`${logged.router.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", via: "1.1 edge-proxy" },
        body: JSON.stringify({ model: "m", messages: [] }),
      });
      expect(res.status).toBe(200);
      expect(via).toMatch(/^1\.1 edge-proxy, 1\.1 radixgate-[0-9a-f]{8}$/);
    } finally {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    }
  });
});
