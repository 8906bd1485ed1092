import type { ServerResponse } from "node:http";
import type { RouterError } from "../errors.js";

/** Writes a router error as JSON, unless a response is already under way. */
export function writeError(
  res: ServerResponse,
  error: RouterError,
  requestId: string,
  extra?: Record<string, string>,
): void {
  if (res.headersSent || res.destroyed) return;
  const body = JSON.stringify(error.toBody());
  res.writeHead(error.status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(body),
    "x-request-id": requestId,
    ...extra,
  });
  res.end(body);
}
