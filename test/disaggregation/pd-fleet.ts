import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import type { ConfigOverrides } from "../../src/config.js";
import type { RunningRouter } from "../../src/server.js";
import { startTestRouter } from "../helpers/router.js";

/** Prefill and decode simulators of one engine behind a radixgate in PD mode. */
export interface PdFleet {
  router: RunningRouter;
  prefill: SimWorker[];
  decode: SimWorker[];
  close(): Promise<void>;
}

export async function startPdFleet(
  flavor: "sglang" | "vllm",
  counts: { prefill: number; decode: number },
  overrides: ConfigOverrides = {},
): Promise<PdFleet> {
  const start = (role: "prefill" | "decode", i: number) =>
    startSimWorker({ id: `${role[0]}${i + 1}`, flavor, role, timeScale: 0 });
  const prefill = await Promise.all(
    Array.from({ length: counts.prefill }, (_, i) => start("prefill", i)),
  );
  const decode = await Promise.all(
    Array.from({ length: counts.decode }, (_, i) => start("decode", i)),
  );
  const router = await startTestRouter({
    ...(flavor === "sglang" ? { pdDisaggregation: true } : { vllmPdDisaggregation: true }),
    prefill: prefill.map((p) => ({ url: p.url, bootstrapPort: p.bootstrapPort ?? null })),
    decode: decode.map((d) => d.url),
    ...overrides,
  });
  return {
    router,
    prefill,
    decode,
    async close() {
      await router.stop(100);
      await Promise.all([...prefill, ...decode].map((w) => w.close()));
    },
  };
}

/** The SSE events of a stream's body ("data: ..." lines, [DONE] included). */
export function events(body: string): string[] {
  return body
    .split("\n")
    .filter((line) => line.startsWith("data: "))
    .map((line) => line.slice(6));
}

export const totalRequests = (workers: readonly SimWorker[]) =>
  workers.reduce((n, w) => n + w.stats().requests, 0);
