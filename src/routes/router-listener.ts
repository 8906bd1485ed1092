import type { IncomingMessage, RequestListener, ServerResponse } from "node:http";
import { getRequestListener, type HttpBindings } from "@hono/node-server";
import type { Hono } from "hono";
import type { RouterContext } from "./context.js";
import { Cors } from "./cors.js";
import { handleInference, INFERENCE_ROUTES } from "./inference.js";

/**
 * The router's node:http listener. The inference POSTs (nearly all the traffic) go straight to
 * their handler, which answers on the raw response; everything else (ops, admin, the model list,
 * wrong methods) goes through hono. Why: hono's adapter builds a Request, a Context and a promise
 * chain for every request, none of which the data plane uses (bench:overhead's profile,
 * docs/benchmarks.md).
 */
export function routerListener(
  ctx: RouterContext,
  app: Hono<{ Bindings: HttpBindings }>,
): RequestListener {
  const viaHono = getRequestListener(app.fetch);
  const endpoints = new Map(INFERENCE_ROUTES.map(({ path, endpoint }) => [path, endpoint]));
  const cors = new Cors(ctx.config.corsAllowedOrigins);
  return (incoming: IncomingMessage, res: ServerResponse) => {
    const url = incoming.url ?? "/";
    const query = url.indexOf("?");
    const path = query === -1 ? url : url.slice(0, query);
    if (cors.apply(incoming, res, path)) return;
    if (incoming.method === "POST") {
      const endpoint = endpoints.get(path);
      if (endpoint !== undefined) {
        handleInference(ctx, incoming, res, endpoint).catch((err: unknown) =>
          ctx.logger.error({ err }, "unhandled error in the data plane"),
        );
        return;
      }
    }
    void viaHono(incoming, res);
  };
}
