import type { HttpBindings } from "@hono/node-server";
import type { Hono } from "hono";
import type { Metrics } from "../metrics.js";
import type { RouterContext } from "./context.js";

type Env = { Bindings: HttpBindings };

/** Liveness, readiness and metrics: unauthenticated, for load balancers and Prometheus. */
export function registerOpsRoutes(app: Hono<Env>, ctx: RouterContext): void {
  const alive = () => Response.json({ status: "ok" });
  app.get("/health", alive);
  app.get("/liveness", alive);

  app.get("/readiness", (c) => {
    if (ctx.state.shuttingDown)
      return c.json({ status: "not_ready", reason: "shutting down" }, 503);
    const workers = ctx.registry.list();
    const healthy = workers.filter((w) => w.available).length;
    if (healthy === 0) {
      const reason =
        workers.length === 0
          ? "no workers registered"
          : `none of ${workers.length} workers is available`;
      return c.json({ status: "not_ready", reason, workers: workers.length, healthy }, 503);
    }
    return c.json({ status: "ready", workers: workers.length, healthy });
  });

  registerMetricsRoute(app, ctx.metrics);
}

export function registerMetricsRoute(app: Hono<Env>, metrics: Metrics): void {
  app.get("/metrics", async () => {
    const text = await metrics.registry.metrics();
    return new Response(text, { headers: { "content-type": metrics.registry.contentType } });
  });
}
