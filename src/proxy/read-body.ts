import type { IncomingMessage } from "node:http";
import { RouterError } from "../errors.js";

/**
 * Reads a request body into one Buffer, refusing more than `limit` bytes: at once from
 * Content-Length, or as soon as a chunked body crosses the limit. Nothing is sent to a worker
 * before the whole body is here, so a 413 never costs a worker anything.
 */
export function readBody(incoming: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = incoming.headers["content-length"];
  if (declared !== undefined && Number(declared) > limit) {
    return Promise.reject(tooLarge(limit));
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const cleanup = () => {
      incoming.off("data", onData);
      incoming.off("end", onEnd);
      incoming.off("error", onError);
      incoming.off("aborted", onAborted);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        cleanup();
        // Stop reading; the 413 goes out with Connection: close.
        incoming.pause();
        reject(tooLarge(limit));
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      cleanup();
      resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size));
    };
    const onError = (err: Error) => {
      cleanup();
      reject(err);
    };
    const onAborted = () => {
      cleanup();
      reject(new ClientGoneError());
    };
    incoming.on("data", onData);
    incoming.on("end", onEnd);
    incoming.on("error", onError);
    incoming.on("aborted", onAborted);
  });
}

/** The client went away; there is no one left to answer. */
export class ClientGoneError extends Error {
  constructor() {
    super("client disconnected");
    this.name = "ClientGoneError";
  }
}

function tooLarge(limit: number): RouterError {
  return new RouterError(
    "payload_too_large",
    `Request body exceeds the limit of ${limit} bytes (--max-payload-size).`,
  );
}
