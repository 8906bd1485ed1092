import type { IncomingMessage, ServerResponse } from "node:http";

/**
 * CORS as SGLang's gateway sets it up (create_cors_layer in sgl-model-gateway/src/server.rs):
 * with no origins given, any origin, method and header (`*`); with a list, those origins only,
 * GET/POST/OPTIONS, the Content-Type and Authorization headers, and x-request-id exposed. Both
 * cache a preflight for an hour.
 *
 * Unlike SGLang, the admin API (workers, cache flushes, loads, /debug) gets no CORS headers:
 * without --admin-api-key it trusts loopback clients, and a page in a browser on that machine
 * must not be able to add a worker that would then receive the prompts.
 */
export class Cors {
  private readonly allowed: ReadonlySet<string>;

  constructor(origins: readonly string[]) {
    this.allowed = new Set(origins);
  }

  /**
   * Sets the CORS headers of a request that has an Origin; answers a preflight itself and then
   * returns true (the caller stops there).
   */
  apply(req: IncomingMessage, res: ServerResponse, path: string): boolean {
    const origin = req.headers.origin;
    if (origin === undefined || isAdminPath(path)) return false;
    const any = this.allowed.size === 0;
    if (!any && !this.allowed.has(origin)) return false;
    res.setHeader("Access-Control-Allow-Origin", any ? "*" : origin);
    res.setHeader("Vary", "Origin");
    const preflight =
      req.method === "OPTIONS" && req.headers["access-control-request-method"] !== undefined;
    if (!preflight) {
      res.setHeader("Access-Control-Expose-Headers", any ? "*" : "x-request-id");
      return false;
    }
    res.setHeader("Access-Control-Allow-Methods", any ? "*" : "GET, POST, OPTIONS");
    res.setHeader("Access-Control-Allow-Headers", any ? "*" : "content-type, authorization");
    res.setHeader("Access-Control-Max-Age", "3600");
    res.writeHead(200, { "content-length": "0" });
    res.end();
    return true;
  }
}

const ADMIN_PREFIXES = ["/workers", "/debug/"];
const ADMIN_PATHS = new Set([
  "/add_worker",
  "/remove_worker",
  "/list_workers",
  "/flush_cache",
  "/get_loads",
  "/v1/loads",
]);

/** Paths behind the admin guard (routes/admin.ts adminGuard and its users). */
function isAdminPath(path: string): boolean {
  return (
    ADMIN_PATHS.has(path) ||
    ADMIN_PREFIXES.some((p) => path === p || path.startsWith(p.endsWith("/") ? p : `${p}/`))
  );
}
