import type { HttpBindings } from "@hono/node-server";
import type { Hono } from "hono";
import type { Metrics } from "../metrics.js";
import type { RouterContext } from "./context.js";

type Env = { Bindings: HttpBindings };

/** Liveness, readiness and metrics: unauthenticated, for load balancers and Prometheus. */
export function registerOpsRoutes(app: Hono<Env>, ctx: RouterContext): void {
  // SGLang's gateway answers liveness with a plain "OK" (sgl-model-gateway/src/server.rs).
  const alive = () => new Response("OK", { headers: { "content-type": "text/plain" } });
  app.get("/health", alive);
  app.get("/liveness", alive);

  // SGLang's fields (status "ready" / "not ready", healthy_workers, total_workers), with
  // radixgate's reason, counts and prefill/decode sides beside them.
  app.get("/readiness", (c) => {
    if (ctx.state.shuttingDown) return c.json({ status: NOT_READY, reason: "shutting down" }, 503);
    const workers = ctx.registry.list();
    const healthy = workers.filter((w) => w.available).length;
    const counts = {
      healthy_workers: healthy,
      total_workers: workers.length,
      workers: workers.length,
      healthy,
    };
    if (healthy === 0) {
      const reason =
        workers.length === 0
          ? "no workers registered"
          : `none of ${workers.length} workers is available`;
      return c.json({ status: NOT_READY, reason, ...counts }, 503);
    }
    if (ctx.config.pairs) {
      // A request needs a pair: one side without an available worker serves nothing.
      const side = (type: "prefill" | "decode") =>
        workers.filter((w) => w.role.type === type && w.available).length;
      const sides = { prefill: side("prefill"), decode: side("decode") };
      if (sides.prefill === 0 || sides.decode === 0) {
        const missing = sides.prefill === 0 ? "prefill" : "decode";
        const reason = `no ${missing} worker is available (prefill/decode disaggregation needs one of each)`;
        return c.json({ status: NOT_READY, reason, ...counts, ...sides }, 503);
      }
      return c.json({ status: "ready", ...counts, ...sides });
    }
    return c.json({ status: "ready", ...counts });
  });

  registerMetricsRoute(app, ctx.metrics);
}

const NOT_READY = "not ready";

export function registerMetricsRoute(app: Hono<Env>, metrics: Metrics): void {
  app.get("/metrics", async () => {
    const text = await metrics.registry.metrics();
    return new Response(text, { headers: { "content-type": metrics.registry.contentType } });
  });
}
