import { afterAll, afterEach, beforeAll } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import type { ConfigOverrides } from "../../src/config.js";
import type { RunningRouter } from "../../src/server.js";
import { postJson, startTestRouter } from "../helpers/router.js";

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

/**
 * One PD fleet for the describe block it is called in: started before its
 * tests, every worker's faults cleared after each test, closed after all.
 * Read it through the returned getter (it exists once beforeAll has run).
 */
export function usePdFleet(
  flavor: "sglang" | "vllm",
  counts: { prefill: number; decode: number },
): () => PdFleet {
  let fleet: PdFleet;
  beforeAll(async () => {
    fleet = await startPdFleet(flavor, counts);
  });
  afterAll(async () => {
    await fleet.close();
  });
  afterEach(() => {
    for (const w of [...fleet.prefill, ...fleet.decode])
      w.setFaults({ failFirst: 0, failStatus: 500, crashMidStream: null, status: null });
  });
  return () => fleet;
}

/** A chat completion through the fleet's router: one system prompt, one question. */
export function pdChat(
  fleet: PdFleet,
  base: { model: string; system: string; maxTokens: number },
  question: string,
  extra: Record<string, unknown> = {},
) {
  return postJson(`${fleet.router.url}/v1/chat/completions`, {
    model: base.model,
    messages: [
      { role: "system", content: base.system },
      { role: "user", content: question },
    ],
    max_tokens: base.maxTokens,
    ...extra,
  });
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
