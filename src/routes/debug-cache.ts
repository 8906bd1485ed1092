import type { HttpBindings } from "@hono/node-server";
import type { Hono } from "hono";
import { adminGuard } from "./admin.js";
import type { RouterContext } from "./context.js";

type Env = { Bindings: HttpBindings };

/**
 * GET /debug/cache: the cache account over the last --cache-account-window-mins minutes, overall,
 * per worker and per model, and the prefixes that lost the most tokens to routing and to eviction
 * (cache-account/, docs/hit-rate.md). Behind the admin API's guard: it shows prompts' first
 * characters.
 */
export function registerDebugCacheRoute(app: Hono<Env>, ctx: RouterContext): void {
  app.use("/debug/cache", adminGuard(ctx));
  app.get("/debug/cache", (c) => c.json(ctx.cacheLedger.snapshot()));
}
