import type { HttpBindings } from "@hono/node-server";
import type { Hono } from "hono";
import { adminGuard } from "./admin.js";
import type { RouterContext } from "./context.js";

type Env = { Bindings: HttpBindings };

/**
 * GET /debug/capacity: the fleet saturation signal explained (admission/fleet-capacity.ts): each
 * ratio with its demand and capacity, the desired workers per model before and after the
 * cool-down, what the fleet is short of, and the scale-in advice (which worker to drain first:
 * the one whose cached prefixes served the fewest cached tokens over the cache account's window).
 */
export function registerDebugCapacityRoute(app: Hono<Env>, ctx: RouterContext): void {
  app.use("/debug/capacity", adminGuard(ctx));
  app.get("/debug/capacity", (c) => {
    const { capacity, cacheLedger } = ctx;
    const reading = capacity.last ?? capacity.sample();
    const served = new Map<string, number>();
    for (const [id, totals] of cacheLedger.window.snapshot(Date.now()).workers)
      served.set(id, totals.reported + totals.unreported);
    const order = capacity.drainOrder(served);
    const { options } = capacity;
    return c.json({
      at: new Date(reading.at).toISOString(),
      healthy_workers: reading.workers,
      short_of: reading.shortOf,
      saturation: {
        prefill_tokens: {
          ratio: reading.prefill.ratio,
          demand_tokens_per_sec: Math.round(reading.prefill.demandPerSec),
          capacity_tokens_per_sec: reading.prefill.capacityPerSec,
          explain:
            "uncached prompt tokens settled per second over healthy workers x --worker-prefill-tokens-per-sec",
          // Settled tokens are throughput: above 1 while the batches have room, the engines
          // prefill faster than the flag says, so the flag (not the fleet) is short.
          ...(reading.prefill.ratio > 1 && reading.slots.ratio < options.targetUtilization
            ? {
                hint: "above 1 while the batches have room: the engines prefill faster than --worker-prefill-tokens-per-sec says; set it to their measured throughput",
              }
            : {}),
        },
        running_slots: {
          ratio: reading.slots.ratio,
          demand: reading.slots.demand,
          capacity: reading.slots.capacity,
          explain:
            "requests in flight (this replica's and its peers') over the workers' batch sizes (engine-reported, else --worker-default-slots)",
        },
      },
      cache_pressure: {
        ratio: reading.cache.ratio,
        working_set_chars: reading.cache.workingSetChars,
        capacity_chars: reading.cache.capacityChars,
        explain:
          "characters the index holds plus those it evicted over the cool-down window, over the engines' KV capacity x 4 characters a token; above 1 the fleet is short of cache (null: no engine reported its capacity)",
      },
      desired_workers: Object.fromEntries(
        [...reading.desired].map(([model, d]) => [
          model,
          { desired: d.desired, without_cooldown: d.raw, serving: d.workers },
        ]),
      ),
      rule: {
        desired:
          "ceil(workers x max(saturation ratios) / target_utilization), at least 1; rises at once, falls only to the largest value of the last cooldown",
        target_utilization: options.targetUtilization,
        cooldown_secs: options.cooldownMs / 1000,
        interval_secs: options.pollMs / 1000,
      },
      scale_in: {
        drain_first: order[0] ?? null,
        order,
        explain:
          "drain the worker whose cached prefixes served the fewest cached tokens over the cache account's window (then the one holding least): scale-in loses the least cache",
      },
    });
  });
}
