import { expect } from "vitest";
import type { SimWorker } from "../../sim/worker.js";
import type { RunningRouter } from "../../src/server.js";
import { postJson, waitFor } from "./router.js";

/**
 * Adds simulated workers through the admin API with their KV-event and replay endpoints, and
 * waits until the router's subscription to every one of them is live.
 */
export async function addWorkersWithEvents(
  router: RunningRouter,
  sims: readonly SimWorker[],
): Promise<void> {
  for (const sim of sims) {
    const res = await postJson(`${router.url}/workers`, {
      url: sim.url,
      kv_events_endpoint: sim.kvEvents!.endpoint,
      kv_events_replay_endpoint: sim.kvEvents!.replayEndpoint,
    });
    expect(res.status).toBe(202);
  }
  const id = (sim: SimWorker) => router.context.registry.get(sim.url)!.id;
  await waitFor(
    () => sims.every((s) => router.context.kvEvents!.isLive(id(s))),
    10_000,
    "every event stream live",
  );
}
