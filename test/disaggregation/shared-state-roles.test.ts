import { describe, expect, it } from "vitest";
import { startSimWorker } from "../../sim/worker.js";
import type { RunningRouter } from "../../src/server.js";
import { redisSkipReason, startRedis, TEST_STATE_SECRET } from "../helpers/redis.js";
import { postJson, startTestRouter, waitFor } from "../helpers/router.js";

describe.skipIf(redisSkipReason !== undefined)(
  `PD workers across replicas sharing --state-url${redisSkipReason ? ` (skipped: ${redisSkipReason})` : ""}`,
  () => {
    it("regression: a prefill worker added on one replica keeps its type and bootstrap port on the others", async () => {
      const redis = await startRedis();
      const prefill = await startSimWorker({ id: "p", role: "prefill", timeScale: 0 });
      const decode = await startSimWorker({ id: "d", role: "decode", timeScale: 0 });
      const routers: RunningRouter[] = [];
      const replica = async () => {
        const router = await startTestRouter({
          pdDisaggregation: true,
          decode: [decode.url],
          stateUrl: redis.url,
          stateSecret: TEST_STATE_SECRET,
          stateKeyPrefix: "pdroles",
          stateLoadIntervalMs: 50,
        });
        routers.push(router);
        return router;
      };
      try {
        const a = await replica();
        const b = await replica();
        const added = await postJson(`${a.url}/workers`, {
          url: prefill.url,
          worker_type: "prefill",
          bootstrap_port: prefill.bootstrapPort,
        });
        expect(added.status).toBe(202);
        await waitFor(() => b.context.registry.get(prefill.url) !== undefined, 10_000, "B adds it");
        expect(b.context.registry.get(prefill.url)!.role).toEqual({
          type: "prefill",
          bootstrapPort: prefill.bootstrapPort,
        });
        // A replica started now loads it from the shared workers hash, type included.
        const c = await replica();
        expect(c.context.registry.get(prefill.url)?.role.type).toBe("prefill");
        await waitFor(() => c.context.registry.get(prefill.url)!.healthy, 10_000, "C probes it");
        const res = await postJson(`${c.url}/v1/completions`, {
          model: "m",
          prompt: "served through a peer's prefill worker",
          max_tokens: 2,
        });
        expect(res.status).toBe(200);
        expect(prefill.stats().requests).toBe(1);
      } finally {
        await Promise.allSettled(routers.map((r) => r.stop(100)));
        await Promise.all([prefill.close(), decode.close()]);
        await redis.stop();
      }
    });
  },
);
