import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { IDLE_KEEP_ALIVE_MS, Worker } from "../../src/workers/worker.js";
import { requestWorker } from "../../src/workers/worker-request.js";

/** The engine's idle timeout, scaled down: what uvicorn's 5 s is to the router's 4 s. */
const ENGINE_IDLE_MS = 600;
const ROUTER_IDLE_MS = Math.round((ENGINE_IDLE_MS * IDLE_KEEP_ALIVE_MS) / 5000);

/**
 * An engine as uvicorn serves one: it keeps an idle connection ENGINE_IDLE_MS, and says nothing
 * of it (no Keep-Alive header). A request that arrives on a connection idle that long is the one
 * its close crosses: the connection goes without an answer, as the race ends on the wire.
 */
describe("connections to an engine that closes idle ones without saying so", () => {
  let server: Server;
  let connections = 0;
  const lastAnswer = new WeakMap<object, number>();

  beforeAll(async () => {
    server = createServer((req, res) => {
      const last = lastAnswer.get(req.socket);
      if (last !== undefined && Date.now() - last >= ENGINE_IDLE_MS) {
        req.socket.destroy();
        return;
      }
      req.resume();
      req.on("end", () => {
        res.end("ok", () => lastAnswer.set(req.socket, Date.now()));
      });
    });
    server.keepAliveTimeout = 0; // no Keep-Alive header, no timer: the rule above
    server.on("connection", () => {
      connections += 1;
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  function worker(): Worker {
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    return new Worker("w", url, {
      breaker: { failureThreshold: 5, openMs: 1000, successThreshold: 1 },
      connectTimeoutMs: 1000,
      idleKeepAliveMs: ROUTER_IDLE_MS,
    });
  }
  const poll = async (w: Worker) =>
    (await requestWorker(w, "/get_server_info", { timeoutMs: 2000 })).body.text();
  const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

  it("is the engines' idle timeout less a margin, so the router closes first", () => {
    expect(IDLE_KEEP_ALIVE_MS).toBeLessThan(5000);
    expect(IDLE_KEEP_ALIVE_MS).toBeGreaterThanOrEqual(1000);
  });

  it("polls further apart than the engine keeps a connection each open their own, and none fails", async () => {
    const w = worker();
    const before = connections;
    for (let i = 0; i < 3; i++) {
      if (i > 0) await pause(ENGINE_IDLE_MS + 100);
      expect(await poll(w)).toBe("ok");
    }
    expect(connections - before).toBe(3);
    await w.pool.close();
  });

  it("polls closer together than that share one connection", async () => {
    const w = worker();
    const before = connections;
    for (let i = 0; i < 4; i++) {
      if (i > 0) await pause(ROUTER_IDLE_MS / 4);
      expect(await poll(w)).toBe("ok");
    }
    expect(connections - before).toBe(1);
    await w.pool.close();
  });
});
