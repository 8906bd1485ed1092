import { Agent } from "undici";
import { exponential, mulberry32 } from "../sim/prng.js";
import { generatedSharedPrefix, openAiBody, type RequestSpec } from "../sim/workloads.js";

/**
 * Background traffic: Poisson arrivals of shared-prefix chats (8 system prompts, so the hit rate
 * climbs as the router learns where each lives), at most 32 outstanding.
 */
export function startTraffic(
  urls: readonly string[],
  rate: number,
  model: string,
): { stop(): Promise<void> } {
  const specs: RequestSpec[] = generatedSharedPrefix({
    groups: 8,
    promptsPerGroup: 64,
    systemPromptTokens: 1024,
    questionTokens: 64,
    outputTokens: 32,
    kind: "chat",
    seed: 7,
  });
  const rng = mulberry32(11);
  // Spread over the replicas at random, as an L4 load balancer would.
  const pick = mulberry32(13);
  const agent = new Agent({ connections: 32, keepAliveTimeout: 30_000 });
  const pending = new Set<Promise<void>>();
  let stopped = false;
  let next = 0;
  let timer: NodeJS.Timeout | undefined;
  const send = (spec: RequestSpec) => {
    const p = agent
      .request({
        origin: urls[Math.floor(pick() * urls.length)] as string,
        path: "/v1/chat/completions",
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(openAiBody(spec, model)),
      })
      .then((res) => res.body.dump())
      .catch(() => {
        // the demo's own traffic: a failure shows in the worker counters, nothing to report here
      })
      .finally(() => pending.delete(p));
    pending.add(p);
  };
  const schedule = () => {
    if (stopped) return;
    timer = setTimeout(
      () => {
        if (pending.size < 32) send(specs[next++ % specs.length] as RequestSpec);
        schedule();
      },
      exponential(rng, 1000 / rate),
    );
  };
  schedule();
  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await Promise.allSettled([...pending]);
      await agent.close();
    },
  };
}
