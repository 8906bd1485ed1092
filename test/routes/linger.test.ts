/**
 * The rest of a body answered early is discarded inside Node's HTTP parser when its length is
 * known: no copy of it reaches JavaScript, and the connection stays in step for the requests
 * after it, even when the end of the refused body and the next request come in one read.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { type AddressInfo, connect, type Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { lingerOnUnreadBody } from "../../src/routes/linger.js";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Refused {
  /** Bytes of the refused bodies that reached the request stream after the answer. */
  seenAfterAnswer: number;
  /** Bodies of the requests that were not refused, as read. */
  echoed: string[];
}

/**
 * A server that answers POST /refuse at once with 400 and lingers on its body, and echoes the
 * body of any other request.
 */
async function refusingServer(
  maxMs = 5000,
  maxBytes = 1_000_000,
): Promise<{ server: Server; port: number; seen: Refused }> {
  const seen: Refused = { seenAfterAnswer: 0, echoed: [] };
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    if (req.url === "/refuse") {
      lingerOnUnreadBody(req, { maxMs, maxBytes });
      req.on("data", (piece: Buffer) => {
        seen.seenAfterAnswer += piece.length;
      });
      res.writeHead(400, { "content-length": 2 }).end("no");
      return;
    }
    const pieces: Buffer[] = [];
    req.on("data", (piece: Buffer) => pieces.push(piece));
    req.on("end", () => {
      const body = Buffer.concat(pieces).toString();
      seen.echoed.push(body);
      res.writeHead(200, { "content-length": Buffer.byteLength(body) }).end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { server, port: (server.address() as AddressInfo).port, seen };
}

function post(path: string, body: string): string {
  return `POST ${path} HTTP/1.1\r\nhost: x\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
}

/** Collects what the server sends on `socket`. */
function received(socket: Socket): () => string {
  let text = "";
  socket.on("data", (piece: Buffer) => {
    text += piece.toString("latin1");
  });
  return () => text;
}

async function until(what: () => boolean, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!what()) {
    if (Date.now() > deadline) throw new Error("timed out");
    await sleep(10);
  }
}

function open(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ port, host: "127.0.0.1" }, () => resolve(socket));
    socket.on("error", reject);
  });
}

describe("lingering on a refused body of known length", () => {
  let server: Server | undefined;
  afterEach(async () => {
    server?.closeAllConnections();
    await new Promise((resolve) => server?.close(resolve));
    server = undefined;
  });

  it("discards the rest in the parser: none of its 200 KB reaches the request stream", async () => {
    const started = await refusingServer();
    server = started.server;
    const socket = await open(started.port);
    const answers = received(socket);
    const rest = "x".repeat(200_000);
    socket.write(`POST /refuse HTTP/1.1\r\nhost: x\r\ncontent-length: ${rest.length}\r\n\r\n`);
    await until(() => answers().includes("\r\n\r\nno"));
    socket.write(rest);
    socket.write(post("/echo", "after"));
    await until(() => started.seen.echoed.length === 1);
    expect(started.seen.echoed).toEqual(["after"]);
    expect(started.seen.seenAfterAnswer).toBe(0);
    socket.destroy();
  });

  it("the next request's body arrives whole when it comes in the same read as the refused body's end", async () => {
    const started = await refusingServer();
    server = started.server;
    const socket = await open(started.port);
    const answers = received(socket);
    const refused = "[".repeat(50_000);
    socket.write(`POST /refuse HTTP/1.1\r\nhost: x\r\ncontent-length: ${refused.length}\r\n\r\n`);
    await until(() => answers().includes("\r\n\r\nno"));
    // One write, so that the parser reads the refused body's end and the next requests at once.
    socket.write(`${refused}${post("/echo", "first")}${post("/echo", "second")}`);
    await until(() => started.seen.echoed.length === 2);
    expect(started.seen.echoed).toEqual(["first", "second"]);
    socket.destroy();
  });

  it("a connection closed half-way leaves the parser whole for the next connection", async () => {
    const started = await refusingServer();
    server = started.server;
    for (let run = 0; run < 3; run++) {
      const half = await open(started.port);
      const answers = received(half);
      half.write(`POST /refuse HTTP/1.1\r\nhost: x\r\ncontent-length: 100000\r\n\r\n`);
      await until(() => answers().includes("\r\n\r\nno"));
      half.write("y".repeat(1000));
      half.destroy();
      await sleep(20);
      // Node pools its parsers: the next connection is likely to get the one just freed.
      const next = await open(started.port);
      next.write(post("/echo", `body ${run}`));
      await until(() => started.seen.echoed.length === run + 1);
      expect(started.seen.echoed[run]).toBe(`body ${run}`);
      next.destroy();
    }
  });

  it("a body that stops coming is cut after the linger time", async () => {
    const started = await refusingServer(200);
    server = started.server;
    const socket = await open(started.port);
    socket.resume();
    const closed = new Promise((resolve) => socket.on("close", resolve));
    socket.on("error", () => {});
    socket.write(`POST /refuse HTTP/1.1\r\nhost: x\r\ncontent-length: 100000\r\n\r\n`);
    socket.write("z".repeat(1000));
    const since = Date.now();
    await closed;
    expect(Date.now() - since).toBeGreaterThanOrEqual(150);
    expect(Date.now() - since).toBeLessThan(3000);
  });

  it("a body declared past the byte bound is read through the stream and cut at the bound", async () => {
    const started = await refusingServer(5000, 50_000);
    server = started.server;
    const socket = await open(started.port);
    const answers = received(socket);
    const closed = new Promise((resolve) => socket.on("close", resolve));
    socket.on("error", () => {});
    socket.write(`POST /refuse HTTP/1.1\r\nhost: x\r\ncontent-length: 1000000\r\n\r\n`);
    await until(() => answers().includes("\r\n\r\nno"));
    for (let sent = 0; sent < 1_000_000 && !socket.destroyed; sent += 10_000) {
      socket.write("w".repeat(10_000));
      await sleep(1);
    }
    await closed;
    expect(started.seen.seenAfterAnswer).toBeGreaterThan(0);
    expect(started.seen.seenAfterAnswer).toBeLessThan(1_000_000);
  });
});
