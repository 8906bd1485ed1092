/**
 * The fault bench's flooding attacker, as cheap as a client can be: one keep-alive socket per
 * loop writing the same precomputed request bytes, reading each answer just far enough to see its
 * status and its end (Content-Length, or a chunked body's last chunk), never parsing JSON. An
 * attacker on another host spends none of the target's cores; on one host this one spends as
 * little of them as it can, so that what the flood costs the target is what shows. (Node's fetch
 * spent 0.7-1 core of the 2 on about 600 requests a second: more than the router or nginx it
 * attacked.) A target that closes the connection (nginx after a 413) gets a new one.
 */
import { connect, type Socket } from "node:net";

export interface RawFlood {
  port: number;
  /** Where the attack comes from (a loopback address other than the legitimate clients'). */
  localAddress: string;
  /** Loops, each one connection, one request at a time, back to back. */
  loops: number;
  /** The whole request: line, headers and body, written as is. */
  request: Buffer;
  /** Each answer's status ("400", ...) or why there was none ("closed", "ECONNRESET"). */
  onAnswer(status: string): void;
}

const CHUNKED_END = Buffer.from("\r\n0\r\n\r\n");

/** Raw HTTP/1.1 request text with a body. */
export function rawPost(path: string, body: string, extraHeaders = ""): string {
  return `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${extraHeaders}\r\n${body}`;
}

/** The deep-json attack's request: a 240 KB chat body nested 120,000 deep from its 60th byte. */
export function deepJsonRequest(): Buffer {
  const depth = 120_000;
  const body = `{"messages":[{"role":"user","content":"x"}],"max_tokens":1,"extra":${"[".repeat(depth)}${"]".repeat(depth)}}`;
  return Buffer.from(rawPost("/v1/chat/completions", body));
}

/** Runs the flood until `stop` aborts. */
export async function rawFlood(flood: RawFlood, stop: AbortSignal): Promise<void> {
  await Promise.all(Array.from({ length: flood.loops }, () => loop(flood, stop)));
}

async function loop(flood: RawFlood, stop: AbortSignal): Promise<void> {
  while (!stop.aborted) {
    const socket = await open(flood).catch(() => undefined);
    if (socket === undefined) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      continue;
    }
    await converse(socket, flood, stop);
    socket.destroy();
  }
}

function open(flood: RawFlood): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({
      port: flood.port,
      host: "127.0.0.1",
      localAddress: flood.localAddress,
    });
    socket.once("connect", () => {
      socket.off("error", reject);
      resolve(socket);
    });
    socket.once("error", reject);
  });
}

/** Requests on one connection until it closes or `stop` aborts. */
function converse(socket: Socket, flood: RawFlood, stop: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    let head = Buffer.alloc(0);
    /** The answer being read: its status, and what of its body is still to come. */
    let answer:
      | { status: string; remaining: number; chunked: boolean; close: boolean; tail: Buffer }
      | undefined;
    /** A request written and not yet answered. */
    let pending = false;
    const finish = (why: string) => {
      // A request cut short counts once; a connection closed between requests is no answer.
      if (pending && why !== "stopped") flood.onAnswer(why);
      pending = false;
      socket.removeAllListeners("data");
      stop.removeEventListener("abort", onStop);
      resolve();
    };
    const onStop = () => finish("stopped");
    const send = () => {
      head = Buffer.alloc(0);
      answer = undefined;
      if (stop.aborted) return finish("stopped");
      pending = true;
      socket.write(flood.request);
    };
    const body = (chunk: Buffer) => {
      const a = answer as NonNullable<typeof answer>;
      if (a.chunked) {
        a.tail = Buffer.concat([a.tail, chunk]).subarray(-CHUNKED_END.length);
        if (a.tail.equals(CHUNKED_END)) done();
      } else {
        a.remaining -= chunk.length;
        if (a.remaining <= 0) done();
      }
    };
    const done = () => {
      pending = false;
      const { status, close } = answer as NonNullable<typeof answer>;
      flood.onAnswer(status);
      if (close) finish("closed");
      else send();
    };
    socket.on("data", (chunk: Buffer) => {
      if (answer !== undefined) return body(chunk);
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf("\r\n\r\n");
      if (end < 0) return;
      const text = head.subarray(0, end).toString("latin1");
      const length = /\r\ncontent-length:\s*(\d+)/i.exec(text);
      answer = {
        status: text.slice(9, 12),
        remaining: length === null ? 0 : Number(length[1]),
        chunked: /\r\ntransfer-encoding:\s*chunked/i.test(text),
        close: /\r\nconnection:\s*close/i.test(text),
        tail: Buffer.from("\r\n"),
      };
      const rest = head.subarray(end + 4);
      if (!answer.chunked && answer.remaining === 0) done();
      else if (rest.length > 0) body(rest);
    });
    socket.on("error", (err: NodeJS.ErrnoException) => finish(err.code ?? "error"));
    socket.on("close", () => finish("closed"));
    stop.addEventListener("abort", onStop);
    send();
  });
}
