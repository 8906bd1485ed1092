import { createServer, type RequestListener, type Server } from "node:http";
import { UsageError } from "./errors.js";

/**
 * The router's HTTP server (data plane or --metrics-port) listening; "address in use" and the like
 * become a ListenError naming the flag, which the CLI reports as a usage error.
 */
export function listen(
  listener: RequestListener,
  host: string,
  port: number,
  flag: string,
): Promise<Server> {
  const server = createServer(listener);
  // Long generations can exceed Node's default request timeout (5 min): the router has its own.
  server.requestTimeout = 0;
  server.headersTimeout = 60_000;
  server.keepAliveTimeout = 65_000;
  return new Promise((resolve, reject) => {
    server.once("error", (err: NodeJS.ErrnoException) => {
      if (err.code === "EADDRINUSE")
        reject(new ListenError(flag, `${flag} ${port}: address ${host}:${port} is already in use`));
      else if (err.code === "EACCES")
        reject(new ListenError(flag, `${flag} ${port}: permission denied on ${host}:${port}`));
      else if (err.code === "EADDRNOTAVAIL" || err.code === "ENOTFOUND")
        reject(new ListenError(flag, `--host ${host}: cannot listen on this address`));
      else reject(err);
    });
    server.listen(port, host, () => resolve(server));
  });
}

/** A listen failure the CLI reports as a usage error (exit 2). */
export class ListenError extends UsageError {
  constructor(flag: string, message: string) {
    super(flag, message);
    this.name = "ListenError";
  }
}
