import { createServer, type RequestListener, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { rawFlood } from "../../bench/lib/raw-attacker.js";

/** The fault bench's cheap flooding client: it must see each answer's end, however it is framed. */
describe("bench raw attacker", () => {
  let server: Server | undefined;
  let connections = 0;
  afterEach(async () => {
    server?.closeAllConnections();
    await new Promise((resolve) => server?.close(resolve));
    server = undefined;
  });

  async function serve(handler: RequestListener): Promise<number> {
    connections = 0;
    server = createServer(handler);
    server.on("connection", () => {
      connections += 1;
    });
    await new Promise<void>((resolve) => server?.listen(0, "127.0.0.1", resolve));
    return (server.address() as AddressInfo).port;
  }

  /** Floods until `enough` answers of `status` came (or 10 s passed, and the test fails). */
  async function run(port: number, status: string, enough: number): Promise<Map<string, number>> {
    const answers = new Map<string, number>();
    const stop = new AbortController();
    const timer = setTimeout(() => stop.abort(), 10_000);
    const body = JSON.stringify({ padding: "x".repeat(100_000) });
    const request = Buffer.from(
      `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    );
    await rawFlood(
      {
        port,
        localAddress: "127.0.0.1",
        loops: 2,
        request,
        onAnswer: (seen) => {
          answers.set(seen, (answers.get(seen) ?? 0) + 1);
          if ((answers.get(status) ?? 0) >= enough) stop.abort();
        },
      },
      stop.signal,
    );
    clearTimeout(timer);
    return answers;
  }

  it("reads answers with a length on kept-alive connections, one request after another", async () => {
    const port = await serve((req, res) => {
      req.resume();
      req.on("end", () => {
        res.writeHead(400, { "content-type": "application/json" });
        res.end('{"error":{"code":"invalid_request"}}');
      });
    });
    const answers = await run(port, "400", 11);
    expect([...answers.keys()]).toEqual(["400"]);
    expect(answers.get("400")).toBeGreaterThan(10);
    expect(connections).toBe(2);
  });

  it("reads a chunked stream to its last chunk", async () => {
    const port = await serve((req, res) => {
      req.resume();
      req.on("end", () => {
        res.writeHead(200, { "content-type": "text/event-stream" });
        res.write("data: 1\n\n");
        setImmediate(() => res.end("data: [DONE]\n\n"));
      });
    });
    const answers = await run(port, "200", 11);
    expect([...answers.keys()]).toEqual(["200"]);
    expect(answers.get("200")).toBeGreaterThan(10);
    expect(connections).toBe(2);
  });

  it("opens a new connection when the server closes one after its answer", async () => {
    const port = await serve((_req, res) => {
      // Answered before the body is read, then closed: nginx's 413.
      res.writeHead(413, { connection: "close", "content-length": 0 });
      res.end();
    });
    const answers = await run(port, "413", 6);
    expect(answers.get("413")).toBeGreaterThan(5);
    expect(connections).toBeGreaterThan(5);
  });
});
