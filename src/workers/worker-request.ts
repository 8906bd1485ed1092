import type { Dispatcher } from "undici";

/** What a request to a worker needs of it: its connection pool, base path and credentials. */
export interface WorkerTarget {
  readonly pool: Dispatcher;
  /** Path prefix of the worker's base URL, "" for none. */
  readonly basePath: string;
  /** The worker's own Authorization header, if it has a key. */
  readonly authorization: string | undefined;
}

export interface WorkerRequestOptions {
  method?: "GET" | "POST";
  /** The whole request (headers and body) is bounded by this. */
  timeoutMs: number;
  /** Sent when the worker has no key of its own (the client's key, passed on). */
  fallbackAuthorization?: string;
  /** A JSON body (POST). */
  json?: unknown;
  /**
   * Close the connection after this request instead of keeping it for the next: for probes of a
   * worker that takes no traffic, so 10,000 failing workers do not hold 10,000 idle sockets.
   */
  closeAfter?: boolean;
}

/**
 * One control-plane request to a worker (health checks, engine introspection, /tokenize, the
 * fleet's /v1/models): under its base path, with its key, and bounded in time. The data plane's
 * requests are built by proxy/forward.ts, which streams and retries.
 */
export function requestWorker(
  worker: WorkerTarget,
  path: string,
  options: WorkerRequestOptions,
): Promise<Dispatcher.ResponseData> {
  const { timeoutMs } = options;
  const headers: Record<string, string> = {};
  const authorization = worker.authorization ?? options.fallbackAuthorization;
  if (authorization !== undefined) headers.authorization = authorization;
  if (options.json !== undefined) headers["content-type"] = "application/json";
  return worker.pool.request({
    method: options.method ?? "GET",
    path: `${worker.basePath}${path}`,
    headers,
    body: options.json === undefined ? undefined : JSON.stringify(options.json),
    signal: AbortSignal.timeout(timeoutMs),
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
    ...(options.closeAfter === true ? { reset: true } : {}),
  });
}

/** A body larger than the reader's limit (the rest is not read). */
export class BodyTooLargeError extends Error {
  constructor(readonly limit: number) {
    super(`body larger than ${limit} bytes`);
  }
}

/**
 * Reads a worker's answer whole, refusing more than `maxBytes` (the socket is dropped at once), so
 * a worker that answers with an endless or huge body costs the router bounded memory.
 */
export async function readCappedBody(
  body: Dispatcher.ResponseData["body"],
  maxBytes: number,
): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += (chunk as Buffer).length;
    if (size > maxBytes) {
      body.destroy();
      throw new BodyTooLargeError(maxBytes);
    }
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}
