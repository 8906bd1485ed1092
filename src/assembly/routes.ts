/**
 * The HTTP surface over a built router: ops (health, readiness, metrics), the admin API, the
 * route explainer, the data plane, and the error handlers that answer in the OpenAI shape.
 */
import type { RequestListener } from "node:http";
import type { HttpBindings } from "@hono/node-server";
import { Hono } from "hono";
import type { Config } from "../config.js";
import { pdEnabled } from "../disaggregation/settings.js";
import { RouterError } from "../errors.js";
import type { Logger } from "../logger.js";
import { registerAdminRoutes } from "../routes/admin.js";
import { bearerKey } from "../routes/auth.js";
import type { RouterContext } from "../routes/context.js";
import { registerDebugCacheRoute } from "../routes/debug-cache.js";
import { registerDebugCapacityRoute } from "../routes/debug-capacity.js";
import { registerFleetRoutes } from "../routes/fleet-ops.js";
import { registerInferenceRoutes } from "../routes/inference.js";
import { registerOpsRoutes } from "../routes/ops.js";
import { registerRouteExplainRoutes } from "../routes/route-explain.js";
import { routerListener } from "../routes/router-listener.js";
import type { RouteOptions } from "../routes/settings.js";

export type Env = { Bindings: HttpBindings };

/** The routes' options: their own settings, and what they report or apply of other features. */
export function routeOptions(config: Config): RouteOptions {
  return {
    ...config.routes,
    // Hashed once here: a request's check hashes only the key it presents.
    apiKey: bearerKey(config.routes.apiKey),
    adminApiKey: bearerKey(config.routes.adminApiKey),
    modelRouting: config.workers.modelRouting,
    modelsTimeoutMs: config.health.timeoutMs,
    queueTimeoutMs: config.admission.queueTimeoutMs,
    queueTimeoutHeader: config.admission.queueTimeoutHeader,
    queueWaitHeader: config.admission.queueWaitHeader,
    explainMatch: config.cacheAccount.explainHeader !== undefined,
    pairs: pdEnabled(config.disaggregation),
  };
}

export function buildRoutes(context: RouterContext): { app: Hono<Env>; listener: RequestListener } {
  const app = new Hono<Env>();
  registerOpsRoutes(app, context);
  registerAdminRoutes(app, context);
  registerRouteExplainRoutes(app, context);
  registerDebugCacheRoute(app, context);
  registerDebugCapacityRoute(app, context);
  registerFleetRoutes(app, context);
  registerInferenceRoutes(app, context);
  installErrorHandlers(app, context.logger);
  return { app, listener: routerListener(context, app) };
}

function installErrorHandlers(app: Hono<Env>, logger: Logger): void {
  app.notFound((c) => {
    const error = new RouterError("not_found", `No route for ${c.req.method} ${c.req.path}.`);
    return c.json(error.toBody(), 404);
  });
  app.onError((err, c) => {
    if (err instanceof RouterError) return c.json(err.toBody(), err.status as 400);
    logger.error({ err, path: c.req.path }, "unhandled error");
    return c.json(new RouterError("internal_error").toBody(), 500);
  });
}
