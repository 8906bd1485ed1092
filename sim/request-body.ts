/** Reading a request's JSON body, bounded by bodyLimitBytes: a 413 beyond it, a 400 when not JSON. */
import type { IncomingMessage, ServerResponse } from "node:http";
import { errorBody } from "./responses.js";
import { sendJson } from "./serve.js";

class BodyTooLarge extends Error {}

/** The parsed JSON body, or undefined once an error (or nothing, if the client left) was sent. */
export async function readJsonBody(
  req: IncomingMessage,
  res: ServerResponse,
  limitBytes: number,
  counters: { rejected: number; aborted: number },
): Promise<unknown> {
  let raw: Buffer;
  try {
    raw = await readBody(req, limitBytes);
  } catch (err) {
    if (err instanceof BodyTooLarge) {
      counters.rejected++;
      res.setHeader("connection", "close");
      sendJson(res, 413, errorBody(413, `request body exceeds ${limitBytes} bytes`));
    } else {
      counters.aborted++;
    }
    return undefined;
  }
  try {
    return JSON.parse(raw.toString("utf8")) as unknown;
  } catch {
    counters.rejected++;
    sendJson(res, 400, errorBody(400, "request body is not valid JSON"));
    return undefined;
  }
}

/** Read a request body up to `limit` bytes; rejects with BodyTooLarge beyond it. */
function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        req.off("data", onData);
        req.resume(); // drain and discard the rest
        reject(new BodyTooLarge());
        return;
      }
      chunks.push(chunk);
    };
    req.on("data", onData);
    req.once("end", () => resolve(Buffer.concat(chunks)));
    req.once("error", reject);
    req.once("close", () => {
      if (!req.complete) reject(new Error("client closed the connection while sending the body"));
    });
  });
}
