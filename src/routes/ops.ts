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
    if (ctx.config.pairs) {
      // A request needs a pair: one side without an available worker serves nothing.
      const side = (type: "prefill" | "decode") =>
        workers.filter((w) => w.role.type === type && w.available).length;
      const sides = { prefill: side("prefill"), decode: side("decode") };
      if (sides.prefill === 0 || sides.decode === 0) {
        const missing = sides.prefill === 0 ? "prefill" : "decode";
        const reason = `no ${missing} worker is available (prefill/decode disaggregation needs one of each)`;
        return c.json(
          { status: "not_ready", reason, workers: workers.length, healthy, ...sides },
          503,
        );
      }
      return c.json({ status: "ready", workers: workers.length, healthy, ...sides });
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
