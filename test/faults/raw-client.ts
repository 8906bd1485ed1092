/**
 * A raw HTTP/1.1 client over one TCP socket, for request bodies no fetch() can send: a body that
 * stops half-way, drips, never ends, or keeps coming after the router has answered.
 */
import { connect, type Socket } from "node:net";

export interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

export interface RawRequest {
  socket: Socket;
  /** The first response on the socket, parsed once its Content-Length bytes are in. */
  answer: Promise<RawAnswer>;
  /** Resolves when the socket is closed (by either side), with the error if it was reset. */
  closed: Promise<Error | undefined>;
  /** Writes and waits for the bytes to be handed to the kernel; false once the socket is gone. */
  write(data: string | Buffer): Promise<boolean>;
}

/** Opens a connection to `url` and sends the request line and headers (no body yet). */
export function openRequest(
  url: string,
  path: string,
  headers: Record<string, string | number>,
  /** The client's own address (another loopback address stands for another client). */
  localAddress?: string,
): RawRequest {
  const { hostname, port } = new URL(url);
  const socket = connect({ host: hostname, port: Number(port), localAddress });
  let received = Buffer.alloc(0);
  let socketError: Error | undefined;
  const answer = new Promise<RawAnswer>((resolve, reject) => {
    const tryParse = () => {
      const end = received.indexOf("\r\n\r\n");
      if (end < 0) return;
      const lines = received.subarray(0, end).toString("latin1").split("\r\n");
      const status = Number(lines[0]?.split(" ")[1]);
      const parsed: Record<string, string> = {};
      for (const line of lines.slice(1)) {
        const colon = line.indexOf(":");
        parsed[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
      }
      const length = Number(parsed["content-length"] ?? 0);
      if (received.length - end - 4 < length) return;
      socket.off("data", onData);
      resolve({
        status,
        headers: parsed,
        body: received.subarray(end + 4, end + 4 + length).toString("utf8"),
      });
    };
    const onData = (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      tryParse();
    };
    socket.on("data", onData);
    socket.on("close", () =>
      reject(socketError ?? new Error("connection closed before a full answer")),
    );
  });
  answer.catch(() => {});
  const closed = new Promise<Error | undefined>((resolve) => {
    socket.on("error", (err) => {
      socketError = err;
    });
    socket.on("close", () => resolve(socketError));
  });
  const head = [`POST ${path} HTTP/1.1`, `host: ${hostname}:${port}`];
  for (const [name, value] of Object.entries(headers)) head.push(`${name}: ${value}`);
  socket.write(`${head.join("\r\n")}\r\n\r\n`);
  return {
    socket,
    answer,
    closed,
    write: (data) =>
      new Promise((resolve) => {
        if (socket.destroyed || !socket.writable) return resolve(false);
        socket.write(data, (err) => resolve(err == null));
      }),
  };
}

/** One chunk of a chunked body (an empty `data` is the last chunk). */
export function chunk(data: string | Buffer): Buffer {
  const bytes = typeof data === "string" ? Buffer.from(data) : data;
  return Buffer.concat([
    Buffer.from(`${bytes.length.toString(16)}\r\n`),
    bytes,
    Buffer.from("\r\n"),
  ]);
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** `work`, or a rejection after `ms` (the router must not wait for the rest of the body). */
export function within<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no ${what} within ${ms} ms`)), ms);
  });
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}
